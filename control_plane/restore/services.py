"""The step an operator runs once after restoring the database (`nachtwacht control
after-restore`), before the replicas serve agents again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from control_plane.database_fence import read_position
from control_plane.errors import ConfigurationError
from control_plane.events.trail import Actor, record_action
from control_plane.replica_sessions import ConnectedReplicas, connected_replicas
from control_plane.types import Connection, Pool

__all__ = ["OVERRIDE_FLAG", "RESTORE_REVOCATION", "AfterRestore", "after_restore"]

# The reason a revoked token carries, shown to the agent and on the run's refusal.
RESTORE_REVOCATION = "restore"

# The command line's flag that runs it while serving replicas are connected.
OVERRIDE_FLAG = "--even-with-replicas-connected"


@dataclass(frozen=True, kw_only=True)
class AfterRestore:
    tokens_revoked: int
    feed_rows_cleared: int
    at: datetime


def after_restore(
    pool: Pool,
    *,
    now: datetime,
    actor: Actor,
    even_with_replicas_connected: bool = False,
) -> AfterRestore:
    """Revoke every outstanding token, empty the answers' change feed and record the server's
    timeline and cluster as restored (the replicas serve a server restored to a point in time,
    or a copy restored into another cluster, only then), in one transaction.

    Refused, changing nothing, while sessions of serving replicas are connected to the database
    (unless `even_with_replicas_connected`): a database replicas serve from is a live one, and
    revoking its tokens stops the updates its agents are in the middle of."""
    with pool.connection() as conn:
        replicas = connected_replicas(conn)
        if replicas.sessions and not even_with_replicas_connected:
            raise _replicas_connected(replicas)
        _refuse_a_commit_that_would_wait_for_ever(conn)
        position = read_position(conn)
        with conn.transaction():
            return _finish(
                conn,
                position.system,
                position.timeline,
                now=now,
                actor=actor,
                replicas_connected=replicas.sessions,
            )


def _replicas_connected(connected: ConnectedReplicas) -> ConfigurationError:
    return ConfigurationError(
        f"{connected.describe()}: a database replicas serve from is live, and after-restore "
        "would revoke the grants of every agent updating from it now. Stop every replica first "
        "(step 1 of the restore), then run after-restore again; nothing was changed. If these "
        "sessions serve no agent from this database, run it with "
        f"{OVERRIDE_FLAG}"
    )


# The server's synchronous standbys by name, and how many standbys stream from it now (a row per
# WAL sender is visible to any role; which of them is synchronous is not).
_SYNCHRONOUS = """
SELECT current_setting('synchronous_standby_names') AS names,
       current_setting('synchronous_commit') IN ('off', 'local') AS commits_wait_for_none,
       (SELECT count(*) FROM pg_stat_replication) AS streaming
"""


def _refuse_a_commit_that_would_wait_for_ever(conn: Connection) -> None:
    """A base backup keeps the old primary's settings: restored without its standbys, a server
    that names synchronous ones makes every commit wait for one, for ever and without a word."""
    row = conn.execute(_SYNCHRONOUS).fetchone()
    if (
        row is None
        or not str(row["names"]).strip()
        or row["commits_wait_for_none"]
        or row["streaming"] > 0
    ):
        return
    raise ConfigurationError(
        "the server waits for a synchronous standby before every commit "
        f"(synchronous_standby_names = {row['names']!r}) and none is connected: every write "
        "would wait for ever. Until the restored server has standbys of its own, set "
        "synchronous_standby_names = '' (ALTER SYSTEM SET synchronous_standby_names = '', then "
        "SELECT pg_reload_conf()) and run after-restore again; nothing was changed"
    )


def _finish(
    conn: Connection,
    system: str,
    timeline: int,
    *,
    now: datetime,
    actor: Actor,
    replicas_connected: int,
) -> AfterRestore:
    # First, so the revocation's own change rows (written by the tokens' trigger) stay.
    cleared = conn.execute("DELETE FROM answer_changes").rowcount
    revoked = conn.execute(
        "UPDATE tokens SET revoked_at = %s, revoked_reason = %s"
        " WHERE revoked_at IS NULL AND expires_at > %s",
        [now, RESTORE_REVOCATION, now],
    ).rowcount
    conn.execute(
        "INSERT INTO restored_timelines (system_identifier, timeline, finished_at)"
        " VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
        [system, timeline, now],
    )
    conn.execute(
        "INSERT INTO database_clusters (system_identifier, recorded_at, recorded_by)"
        " VALUES (%s, %s, 'after-restore') ON CONFLICT DO NOTHING",
        [system, now],
    )
    record_action(
        conn,
        kind="platform.restored",
        actor=actor,
        at=now,
        data={
            "revoked_tokens": revoked,
            "timeline": timeline,
            "replica_sessions_connected": replicas_connected,
        },
    )
    return AfterRestore(tokens_revoked=revoked, feed_rows_cleared=cleared, at=now)
