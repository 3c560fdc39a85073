"""How a serving replica's database sessions name themselves, and how to find them.

Every session a `nachtwacht control serve` worker opens (its pools and its change feed) carries
the `application_name` `nachtwacht serve <replica identity>`; its reconcile lock's session
carries `nachtwacht reconcile <replica identity>` (taken by `control_plane.reconcile.leader`).
The name is set by the replica itself and replaces one the database URL gives. `after-restore`
looks for these sessions in `pg_stat_activity` before it revokes anything: a replica connected to
the database it is about to reset is serving agents from it, so the database is live, not
restored.

A session takes its name only once the database fence has admitted its server
(`control_plane.database_fence`): a replica left running across a restore, fenced from the
restored server until `after-restore` has run, opens a session there now and then only to check
it and close it again, unnamed. It serves nothing from that server, and does not hold
`after-restore` up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from control_plane.types import Connection

__all__ = [
    "ConnectedReplicas",
    "connected_replicas",
    "name_session",
    "reconcile_session_name",
    "replica_session_name",
]

# PostgreSQL keeps the first 63 bytes of an application_name.
_APPLICATION_NAME_BYTES = 63
SERVE_SESSION_PREFIX = "nachtwacht serve "
RECONCILE_SESSION_PREFIX = "nachtwacht reconcile "


def _session_name(prefix: str, identity: str) -> str:
    return (prefix + identity).encode()[:_APPLICATION_NAME_BYTES].decode(errors="ignore")


def replica_session_name(identity: str) -> str:
    """The `application_name` of a serving replica's sessions."""
    return _session_name(SERVE_SESSION_PREFIX, identity)


def reconcile_session_name(identity: str) -> str:
    """The `application_name` of the session that holds (or asks for) the reconcile lock."""
    return _session_name(RECONCILE_SESSION_PREFIX, identity)


# `application_name` is shown to every role; `client_addr` only for the role's own sessions (or
# with pg_read_all_stats): NULL for another role's, and NULL for a Unix-domain socket.
_CONNECTED = """
SELECT count(*) AS sessions,
       coalesce(array_agg(DISTINCT coalesce(host(client_addr), CASE
           WHEN client_port = -1 THEN 'the local socket'
           ELSE 'an address this role may not see' END)), '{}') AS addresses
  FROM pg_stat_activity
 WHERE datname = current_database()
   AND pid <> pg_backend_pid()
   AND (starts_with(application_name, %s) OR starts_with(application_name, %s))
"""


@dataclass(frozen=True, kw_only=True)
class ConnectedReplicas:
    sessions: int  # sessions of serving replicas connected to this database now
    addresses: tuple[str, ...]  # where they connect from, sorted

    def describe(self) -> str:
        return (
            f"{self.sessions} session(s) of `nachtwacht control serve` are connected to this "
            f"database, from {', '.join(self.addresses)}"
        )


def name_session(conn: psycopg.Connection[Any], application_name: str) -> None:
    """Name `conn`'s session `application_name` (for the rest of the session)."""
    conn.execute("SELECT set_config('application_name', %s, false)", [application_name])
    if not conn.autocommit:
        conn.commit()


def connected_replicas(conn: Connection) -> ConnectedReplicas:
    """The sessions of serving replicas connected to `conn`'s database, besides `conn`."""
    row = conn.execute(_CONNECTED, [SERVE_SESSION_PREFIX, RECONCILE_SESSION_PREFIX]).fetchone()
    if row is None:
        return ConnectedReplicas(sessions=0, addresses=())
    return ConnectedReplicas(
        sessions=int(row["sessions"]),
        addresses=tuple(sorted(str(address) for address in row["addresses"])),
    )
