"""Never write to a demoted primary: each process follows the newest timeline it has seen.

A database URL may name several hosts (`host=h1,h2 port=p1,p2 target_session_attrs=read-write`):
libpq connects to the first one that accepts writes. After a failover that is the promoted
standby — until the old primary is started again by mistake, comes back read-write on its old
timeline, and libpq, trying the hosts in order, takes it. Every write there is lost to the fleet,
and a grant written there is a grant the new primary never counted.

So every new connection (the pool's, the change feed's, the reconcile lock's) is checked before
it is used: its server's position is the cluster's system identifier (the same on a primary and
the standbys made from it) and the timeline its WAL is written on (a promotion starts a new,
higher one; a demoted primary restarted stays on the old one). Each process remembers the newest
position it has seen per URL. A server behind it — same cluster, older timeline — is fenced: the
connection is closed, the error is logged (the first time, then once a minute), every host of the
URL is asked for its position and the host holding the newest one is tried first from then on;
until one is found, the request answers 503 `database_unavailable`. A server of another cluster
(another system identifier) is fenced too: after a restore into a new cluster, restart the
replicas.

A process that has seen nothing yet (just started) asks every host of the URL before its first
connection and takes the newest timeline among them: two writable hosts on different timelines
means the newer one is the primary and the older one is fenced. A process that only ever reaches
the old primary (the new one is down, and nothing on the URL shows the newer timeline) cannot know
it is stale: that is why an old primary must never be started as a primary (see the operator's
page: rewind it into a standby).

A database restored with `pg_dump` and `pg_restore` into a server of another cluster carries its
past as well, with nothing in the server's settings to say so. Its data says it: the table
`database_clusters` names every cluster the data was migrated on or finished a restore on, and
the server's own system identifier is not among them. Such a server is fenced until
`after-restore` has added it (the same two commands may use it before).

A server restored from a base backup to a point in time is the same cluster on a new timeline:
to the rule above, a promotion. But its data is older than what the fleet has seen, and until
`nachtwacht control after-restore` has run on it, a token it remembers may be honoured although
its agent has finished or the operators revoked it after the point. PostgreSQL keeps the
recovery target it was started with in its settings (`recovery_target_name`, `_time`, `_lsn`,
`_xid`, `recovery_target`), which any role may read; a promoted standby has none. So a writable
server with a recovery target is served only once `after-restore` has recorded its timeline in
`restored_timelines`; until then it is fenced, whether this process saw its cluster before or
not. So is such a server while it still replays towards its target (it takes connections then):
a session admitted during the replay would stay connected through the promotion. The two
commands that must work on it — `migrate` and `after-restore` itself — say so
(`allow_unfinished_restore`). A standby given a recovery target and then promoted is fenced the
same way until `after-restore` runs on it: set no recovery target on a standby meant to be
promoted.

The timeline of a primary is read from the name of the WAL file it writes now (the first eight
hex digits): `pg_control_checkpoint()` names a promoted server's new timeline only after its first
checkpoint, which may come minutes after the promotion. A standby's is its last restart point's,
a lower bound, which is all the fence needs from it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

from control_plane.repeated_warning import RepeatedWarning
from control_plane.replica_sessions import name_session

__all__ = [
    "CONNECTION_DEFAULTS",
    "PROBE_CONNECT_SECONDS",
    "DatabaseFence",
    "FencedServer",
    "ServerPosition",
    "cluster_known",
    "fence_for",
    "fenced_connect",
    "read_position",
    "restore_finished",
]

logger = logging.getLogger(__name__)

# A fenced server is refused on every new connection, one per request while it lasts: the error
# is logged the first time and then at most this often (with the count since), so the reason stays
# in view without burying everything else in the log.
FENCED_LOG_EVERY_SECONDS = 60.0

# A database host that vanishes without a word (powered off, cut off by the network) sends no
# reset: without these, a statement sent to it waits for the kernel's retransmissions (about 15
# minutes) and a new connection for its SYN retries (about 2 minutes), holding a request and a
# pool connection all that time. With them, an unanswered statement fails after 15 s, an idle
# connection is found dead within 25 s, and a host that does not answer a connection is given up
# after 5 s for the URL's next one. A URL's own values win. libpq ignores the TCP ones on a
# Unix-domain socket (the embedded server's).
CONNECTION_DEFAULTS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "15000",  # milliseconds
}

# How long asking one host for its position may take: a host that is down must not hold up the
# others for libpq's default (forever).
PROBE_CONNECT_SECONDS = 2

_POSITION = """
SELECT s.system_identifier::text AS system,
       pg_is_in_recovery() AS standby,
       CASE WHEN pg_is_in_recovery()
            THEN (SELECT timeline_id FROM pg_control_checkpoint())
            ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int
       END AS timeline,
       (SELECT string_agg(name || ' = ' || quote_literal(setting), ', ' ORDER BY name)
          FROM pg_settings
         WHERE name IN ('recovery_target', 'recovery_target_lsn',
                        'recovery_target_name', 'recovery_target_time',
                        'recovery_target_xid')
           AND setting <> '') AS recovery_target
  FROM pg_control_system() s
"""

_RESTORE_TABLE = "SELECT to_regclass('restored_timelines') IS NOT NULL"
_RESTORE_FINISHED = (
    "SELECT EXISTS (SELECT 1 FROM restored_timelines"
    " WHERE system_identifier = %s AND timeline = %s)"
)

_CLUSTERS_TABLE = "SELECT to_regclass('database_clusters') IS NOT NULL"
_CLUSTER_KNOWN = (
    "SELECT NOT EXISTS (SELECT 1 FROM database_clusters)"
    " OR EXISTS (SELECT 1 FROM database_clusters WHERE system_identifier = %s)"
)


class FencedServer(psycopg.OperationalError):
    """The server behind the newest position seen, or of another cluster: never used.

    An `OperationalError`, so the pool retries and a request answers 503 `database_unavailable`."""


@dataclass(frozen=True, kw_only=True)
class ServerPosition:
    """Where a server stands: its cluster, the timeline it is on, whether it is a standby, and
    the recovery target a writable server was restored to (None for any other)."""

    system: str
    timeline: int
    standby: bool
    recovery_target: str | None = None


@dataclass(frozen=True, kw_only=True)
class _Host:
    host: str
    port: str
    hostaddr: str | None


def read_position(conn: psycopg.Connection[Any]) -> ServerPosition:
    """The position of `conn`'s server (one statement, no transaction left open)."""
    row = conn.cursor(row_factory=tuple_row).execute(_POSITION).fetchone()
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        conn.rollback()
    if row is None:
        raise FencedServer("the server did not say where it stands")
    system, standby, timeline, target = row
    return ServerPosition(
        system=str(system),
        timeline=int(timeline),
        standby=bool(standby),
        recovery_target=None if target is None else str(target),
    )


def restore_finished(conn: psycopg.Connection[Any], position: ServerPosition) -> bool:
    """True when `after-restore` has recorded `position`'s timeline (no transaction left open)."""
    return _asked_of_table(
        conn,
        _RESTORE_TABLE,
        _RESTORE_FINISHED,
        [position.system, position.timeline],
        without_table=False,
    )


def cluster_known(conn: psycopg.Connection[Any], position: ServerPosition) -> bool:
    """True unless the data names the clusters it lives in and `position`'s is not one of them:
    a copy restored into another cluster (no transaction left open)."""
    return _asked_of_table(
        conn, _CLUSTERS_TABLE, _CLUSTER_KNOWN, [position.system], without_table=True
    )


def _asked_of_table(
    conn: psycopg.Connection[Any],
    table_exists: str,
    question: str,
    params: list[Any],
    *,
    without_table: bool,
) -> bool:
    """The yes-or-no `question`, asked once `table_exists` says its table is there (a database
    not migrated that far answers `without_table`); no transaction left open."""
    cursor = conn.cursor(row_factory=tuple_row)
    try:
        table = cursor.execute(table_exists).fetchone()
        if table is None or not table[0]:
            return without_table
        row = cursor.execute(question, params).fetchone()
        return row is not None and bool(row[0])
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.rollback()


def _hosts_of(params: dict[str, Any]) -> list[_Host]:
    """The hosts of a (multi-host) URL, in its order; a single port applies to every host."""
    hosts = str(params.get("host") or "").split(",")
    addrs = str(params["hostaddr"]).split(",") if params.get("hostaddr") else None
    count = max(len(hosts), len(addrs or []))
    if len(hosts) == 1:
        hosts *= count
    ports = str(params.get("port") or "").split(",")
    if len(ports) == 1:
        ports *= count
    if len(ports) != count or (addrs is not None and len(addrs) != count):
        return []  # libpq refuses such a URL itself; nothing to choose between
    return [
        _Host(host=hosts[i], port=ports[i], hostaddr=addrs[i] if addrs else None)
        for i in range(count)
    ]


class DatabaseFence:
    """One process's memory of the newest position of one URL's cluster, and the connections
    that respect it (see the module's docstring)."""

    def __init__(self, database_url: str) -> None:
        self._params = {**CONNECTION_DEFAULTS, **conninfo_to_dict(database_url)}
        self._hosts = _hosts_of(self._params)
        self._lock = threading.Lock()
        self._newest: ServerPosition | None = None
        self._first = 0  # the index of the host tried first
        self._unfinished_restore_allowed = False
        self._last_refusal: str | None = None
        self._fenced = RepeatedWarning(FENCED_LOG_EVERY_SECONDS)

    def allow_unfinished_restore(self) -> None:
        """Use a server restored to a point in time before `after-restore` has run on it: only
        for `migrate` and `after-restore`, which are how a restore is finished."""
        self._unfinished_restore_allowed = True

    @property
    def newest(self) -> ServerPosition | None:
        return self._newest

    @property
    def last_refusal(self) -> str | None:
        """Why the last server checked was fenced; None once a server has been used since."""
        return self._last_refusal

    def conninfo(self) -> str:
        """The URL, its hosts reordered so the one that held the newest position comes first."""
        with self._lock:
            first = self._first
        if first == 0 or not self._hosts:
            return make_conninfo("", **self._params)
        order = [self._hosts[first], *self._hosts[:first], *self._hosts[first + 1 :]]
        return make_conninfo("", **{**self._params, **_host_params(order)})

    def connect(
        self, *, application_name: str | None = None, **kwargs: Any
    ) -> psycopg.Connection[Any]:
        """A new connection to the newest primary of the URL, checked (`check`); named
        `application_name` once the check has passed (`replica_sessions.name_session`)."""
        conn = psycopg.connect(self.conninfo(), **kwargs)
        try:
            self.check(conn)
        except FencedServer:
            # `check` has asked every host and put the newest first: one more try at once.
            conn = psycopg.connect(self.conninfo(), **kwargs)
            self.check(conn)
        if application_name is not None:
            name_session(conn, application_name)
        return conn

    def check(self, conn: psycopg.Connection[Any]) -> None:
        """Return if `conn`'s server is at the newest position seen (learning it when it is
        newer); else close `conn`, find the newest host and raise `FencedServer`."""
        try:
            position = read_position(conn)
        except BaseException:
            conn.close()
            raise
        if self._newest is None and len(self._hosts) > 1:
            self._learn(self._survey())
        refusal = (
            self._unfinished_restore(position, conn)
            or self._copied_cluster(position, conn)
            or self._refusal(position, conn)
        )
        self._last_refusal = refusal
        if refusal is None:
            return
        conn.close()
        self._log_fenced(refusal)
        self._point_at_newest()
        raise FencedServer(refusal)

    def _log_fenced(self, refusal: str) -> None:
        repeat = self._fenced.holds(refusal)
        if repeat is None:
            return
        if repeat.unsaid:
            logger.error(
                "FENCED: %s (refused %d more times since the last line)", refusal, repeat.unsaid
            )
        else:
            logger.error("FENCED: %s", refusal)

    def _unfinished_restore(
        self, position: ServerPosition, conn: psycopg.Connection[Any]
    ) -> str | None:
        if position.recovery_target is None or self._unfinished_restore_allowed:
            return None
        try:
            if restore_finished(conn, position):
                return None
        except BaseException:
            conn.close()
            raise
        return (
            f"the database at {conn.info.host}:{conn.info.port} was restored to a point in time"
            f" ({position.recovery_target}, timeline {position.timeline}) and"
            " `nachtwacht control after-restore` has not run on it: not used until it has"
        )

    def _copied_cluster(
        self, position: ServerPosition, conn: psycopg.Connection[Any]
    ) -> str | None:
        if self._unfinished_restore_allowed:
            return None
        try:
            if cluster_known(conn, position):
                return None
        except BaseException:
            conn.close()
            raise
        return (
            f"the database at {conn.info.host}:{conn.info.port} holds data written on another"
            f" cluster (this server's system identifier is {position.system}): a restore into a"
            " new server, and `nachtwacht control after-restore` has not run on it: not used"
            " until it has"
        )

    def _refusal(self, position: ServerPosition, conn: psycopg.Connection[Any]) -> str | None:
        where = f"{conn.info.host}:{conn.info.port}"
        with self._lock:
            if self._advance(position, where):
                return None
            newest = self._newest
            assert newest is not None
        if position.system != newest.system:
            return (
                f"the database at {where} is another cluster (system identifier"
                f" {position.system}, expected {newest.system}): not used; after a restore"
                " into a new cluster, restart this replica"
            )
        if position.timeline < newest.timeline:
            return (
                f"the database at {where} is on timeline {position.timeline}, behind timeline"
                f" {newest.timeline} already seen: a demoted primary, never written to"
                " (rewind it into a standby)"
            )
        return None

    def _advance(self, position: ServerPosition, where: str) -> bool:
        """Take `position` as the newest when it is (the first seen, or a newer timeline of the
        same cluster); the lock is held."""
        newest = self._newest
        if newest is not None and (
            position.system != newest.system or position.timeline <= newest.timeline
        ):
            return False
        if newest is not None:
            logger.warning(
                "the database at %s is on timeline %d (was %d): following the promotion",
                where,
                position.timeline,
                newest.timeline,
            )
        self._newest = position
        return True

    def _learn(self, positions: list[tuple[int, ServerPosition]]) -> None:
        with self._lock:
            for index, position in positions:
                host = self._hosts[index]
                self._advance(position, f"{host.host}:{host.port}")

    def _point_at_newest(self) -> None:
        """Ask every host; the writable one at the newest position is tried first from now."""
        positions = self._survey()
        self._learn(positions)
        with self._lock:
            newest = self._newest
            for index, position in positions:
                if (
                    newest is not None
                    and not position.standby
                    and position.system == newest.system
                    and position.timeline >= newest.timeline
                ):
                    self._first = index
                    return

    def _survey(self) -> list[tuple[int, ServerPosition]]:
        """The position of every host that answers, with its index in the URL."""
        answers = []
        for index, position in self._each_host():
            answers.append((index, position))
        return answers

    def _each_host(self) -> Iterator[tuple[int, ServerPosition]]:
        for index, host in enumerate(self._hosts):
            params = {
                **self._params,
                **_host_params([host]),
                "target_session_attrs": "any",
                "connect_timeout": str(PROBE_CONNECT_SECONDS),
            }
            try:
                with psycopg.connect(make_conninfo("", **params), autocommit=True) as conn:
                    yield index, read_position(conn)
            except psycopg.Error as exc:
                logger.info("database host %s:%s did not answer: %s", host.host, host.port, exc)


def _host_params(hosts: list[_Host]) -> dict[str, str]:
    params = {
        "host": ",".join(host.host for host in hosts),
        "port": ",".join(host.port for host in hosts),
    }
    if hosts and hosts[0].hostaddr is not None:
        params["hostaddr"] = ",".join(host.hostaddr or "" for host in hosts)
    return params


_fences: dict[str, DatabaseFence] = {}
_fences_lock = threading.Lock()


def fence_for(database_url: str) -> DatabaseFence:
    """This process's fence for `database_url`: one per URL, shared by the pool, the change feed
    and the reconcile lock, so what one of them learns the others respect."""
    with _fences_lock:
        fence = _fences.get(database_url)
        if fence is None:
            fence = _fences[database_url] = DatabaseFence(database_url)
        return fence


def fenced_connect(database_url: str, **kwargs: Any) -> psycopg.Connection[Any]:
    """`psycopg.connect`, never to a server behind the newest position this process has seen."""
    return fence_for(database_url).connect(**kwargs)
