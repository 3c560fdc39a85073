"""Where the database is: an embedded PostgreSQL in a data directory, or any PostgreSQL 15+ by URL.

The embedded server (`pgserver`) is started in `<data dir>/postgres`. Several processes may use one
data directory at once — `nachtwacht control serve` and the admin commands run beside it: pgserver
serialises start-up with a file lock, attaches to a server that is already running, and only the
last process to let go stops it.

Run as root, pgserver runs PostgreSQL as the user `pgserver`; left to itself it makes that user
with `useradd -s /bin/bash` — a login account with a shell and a uid among the people's (1001),
made without a word. PostgreSQL only needs an identity to run under, never a login, so
`ensure_server_user` makes it first, as a system account (a uid below the people's) with no login
shell and no home, and pgserver then finds it. An account of that name that already has a login
shell (made by pgserver before) is left as it is, since it may be someone's, and a warning says
how to take its shell away. `useradd` is not safe against itself either: six processes starting at
once on a fresh host made the user up to three times with three uids, and a process whose uid was
overwritten failed in `initdb` ("could not look up effective user ID 1001"); so it is made once,
under a lock on pgserver's own installation directory (root's, like the user table).

pgserver counts those processes in `<pgdata>/.handle_pids.json`. A process killed with SIGKILL
never takes its pid out, so after `serve` was killed and restarted the list still named the dead
process, and a clean stop left PostgreSQL running "for it". Before attaching, the pids of processes
that no longer exist are forgotten (under pgserver's own lock).

A pool waits at most `POOL_WAIT_SECONDS` for a connection: while the database is down a request is
answered 503 `database_unavailable` within seconds instead of hanging for the driver's 30.

When the database comes back, the pool reconnects within `RECONNECT_SECONDS` or so: psycopg_pool
retries a lost connection with a doubling delay until its `reconnect_timeout` (five minutes by
default), so after an outage of half a minute the next try could come 30 s after the database
was back. A short `reconnect_timeout` ends each series of tries early; the next request that
waits for a connection starts a new one at once. Every new connection is checked against the
fence first (`database_fence`): a demoted primary is never used.

When the database ends the sessions under a running pool (a DBA's `pg_terminate_backend`, a
pooler that cuts idle connections, a restart), the pool's idle connections are dead and nobody
knows until one is used: each used to fail the request that took it, one 503 per idle connection.
So the pool looks at each connection before handing it out (`CutConnectionCheck`): an idle
connection is told nothing by its server unless the server ended its session (its last words and
the socket's end are waiting to be read), so nothing to read means good, at the cost of one poll
of the socket and no round trip. A connection with something to read is asked an empty query;
failing, it is thrown away, the pool's other idle connections are checked at once (they were most
likely cut together: left to the pool, a request waits 1 s, then 2 s between dead ones and runs
out of its wait at the third), and the request takes a fresh one. Only a request whose statement
was sent is ever answered 503 for a cut connection: a statement that may have run is never sent
again (a claim that may have been granted must not be granted twice).

A request never waits long for a lock: the API's pool opens its connections with a
`lock_timeout` and a `statement_timeout` (`SessionBounds`, given in the libpq `options` of the
connection, so no request pays a round trip for them). A session that holds a lock a request
needs — a person's `psql` left in a transaction, a stuck migration — then costs that request a
503 `database_unavailable` after `REQUEST_LOCK_TIMEOUT_SECONDS`, not its pool connection and
worker thread for as long as the lock is held: without the bound, the requests behind the lock
took every connection of the pool, and every other request, of every organisation, was answered
503 once it had waited for a connection. The bound is below the pool's wait for a connection,
so a request queued behind the ones that wait for the lock gets its connection when they give
up. A statement cancelled by a bound ends its transaction, so a grant is written whole or not at
all.

The reconcile worker's pool has the same `lock_timeout` and no `statement_timeout` (its passes
may run for seconds). What a pass holds while it waits for a lock, requests wait for in turn —
the kept offers' refresh, say, has taken every agent's stale mark, which a poll's or a claim's
write must wait for — so a pass that waited longer than a request would only turn that wait into
more refused requests; it gives up instead, and the next pass does the work. The admin commands
(a person watching, who can interrupt) and the migrations (their own `--lock-timeout-seconds`)
carry no such bounds: `open_pool` without `bounds`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import pwd
import select
import subprocess
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from control_plane.database_fence import fence_for
from control_plane.errors import DatabaseUnavailable
from control_plane.replica_sessions import name_session

__all__ = [
    "DATABASE_URL_ENV",
    "MAX_POOL_WAIT_SECONDS",
    "POOL_WAIT_SECONDS",
    "RECONNECT_SECONDS",
    "REQUEST_LOCK_TIMEOUT_SECONDS",
    "REQUEST_STATEMENT_TIMEOUT_SECONDS",
    "SERVER_USER",
    "CutConnectionCheck",
    "EmbeddedPostgres",
    "SessionBounds",
    "bounded_conninfo",
    "bounded_options",
    "database_url_with_name",
    "ensure_server_user",
    "first_line",
    "login_shell_warning",
    "make_server_user",
    "open_pool",
    "reconcile_bounds",
    "server_user_command",
    "told_something",
]

DATABASE_URL_ENV = "NACHTWACHT_DATABASE_URL"
EMBEDDED_DATABASE = "nachtwacht"
# How long a request waits for a pooled connection before it is answered 503: an agent retries
# next minute anyway, and a request that hangs holds a worker thread the healthy ones need.
POOL_WAIT_SECONDS = 3.0
MAX_POOL_WAIT_SECONDS = 60.0
# How long one series of reconnection tries lasts (tries after 0, ~1 and ~3 s) before the pool
# gives it up and the next waiting request starts another: the bound on how long a replica keeps
# answering 503 after the database is back.
RECONNECT_SECONDS = 3.0
# How long a request's statement waits for a lock another session holds before it is cancelled
# (then a 503). A claim's statements take milliseconds, and the longest wait the product itself
# makes a request's statement do is a round's grants queueing on its counter rows (a few hundred
# milliseconds in a burst); far below an agent's request timeout (10 s) and the load balancer's
# (30 s), and below `POOL_WAIT_SECONDS`, so that a request queued for a connection behind the
# ones waiting for a held lock gets one when they give up, before its own wait runs out.
REQUEST_LOCK_TIMEOUT_SECONDS = 2.0
# How long one statement of a request may run at all (its lock waits included): twice the longest
# a request runs on a large fleet (the kept offers' refresh after a fleet-wide change, 2.6 s for
# 10,000 agents, in several statements); with the pool's wait (8 s), still below an agent's
# request timeout (10 s), so the agent hears the 503. Publishing a release stores its build
# without it (`releases.services`), and a slot's warm-up cut by it is skipped (`warm_up`).
REQUEST_STATEMENT_TIMEOUT_SECONDS = 5.0
# The bounds a setting may give: above 0 (libpq's 0 would be "no bound"), at most a minute.
MAX_REQUEST_TIMEOUT_SECONDS = 60.0
# How long a process starting up waits for its pool's first connection before it gives up.
POOL_OPEN_SECONDS = 15.0
# pgserver's list of the processes using one data directory.
_HANDLES_FILE = ".handle_pids.json"
# The system user pgserver runs PostgreSQL as when started by root (a fixed name in pgserver).
SERVER_USER = "pgserver"

logger = logging.getLogger(__name__)


def first_line(exc: BaseException | None) -> str:
    """A foreign error as one line for a person (libpq and SQLAlchemy messages run to several)."""
    text = str(exc).strip() if exc is not None else ""
    return text.splitlines()[0] if text else type(exc).__name__


def database_url_with_name(database_url: str, dbname: str) -> str:
    """The same server and credentials, another database."""
    params = conninfo_to_dict(database_url)
    params["dbname"] = dbname
    return make_conninfo("", **params)


# Shells that let nobody log in; the first that exists is the new account's.
NO_LOGIN_SHELLS = ("/usr/sbin/nologin", "/sbin/nologin", "/usr/bin/false", "/bin/false")


def server_user_command(name: str, shell: str) -> list[str]:
    """The `useradd` that makes the embedded server's user: a system account (its uid below the
    people's, no password ageing), no home directory, `shell` that refuses a login, its own
    group, and a comment saying what it is for."""
    return [
        "useradd",
        "--system",
        "--shell",
        shell,
        "--no-create-home",
        "--home-dir",
        "/nonexistent",
        "--user-group",
        "--comment",
        "nachtwacht embedded PostgreSQL",
        name,
    ]


def login_shell_warning(name: str, shell: str) -> str | None:
    """The operator's line when the server's existing account `name` can log in, else None."""
    if shell in NO_LOGIN_SHELLS:
        return None
    return (
        f"the embedded PostgreSQL runs as the account {name!r}, which has the login shell"
        f" {shell or '/bin/sh'!r} (made that way by an earlier version); it needs no login:"
        f" `usermod --shell {NO_LOGIN_SHELLS[0]} {name}`"
    )


def _no_login_shell() -> str:
    return next((shell for shell in NO_LOGIN_SHELLS if Path(shell).exists()), NO_LOGIN_SHELLS[-1])


def ensure_server_user(name: str = SERVER_USER) -> None:
    """As root: make the system user the embedded server runs as (see the module's docstring),
    once, whoever else starts at the same moment. Any other user: nothing to do (PostgreSQL
    runs as that user)."""
    if os.geteuid() != 0:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # see EmbeddedPostgres.start
        import pgserver

    installation = os.open(Path(pgserver.__file__).parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(installation, fcntl.LOCK_EX)
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            make_server_user(name)
        else:
            warning = login_shell_warning(name, entry.pw_shell)
            if warning is not None:
                logger.warning("%s", warning)
    finally:
        os.close(installation)  # closing lets go of the lock


def make_server_user(name: str) -> None:
    """`useradd` the server's account (`server_user_command`); failing, one line saying how."""
    command = server_user_command(name, _no_login_shell())
    try:
        subprocess.run(command, check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        said = exc.stderr.strip() if isinstance(exc, subprocess.CalledProcessError) else exc
        raise DatabaseUnavailable(
            f"run as root, the embedded PostgreSQL runs as the system account {name!r}, which"
            f" could not be made ({said}): make it with `{' '.join(command)}`, or run as"
            " another user, or give --database-url"
        ) from exc


class EmbeddedPostgres:
    """A real PostgreSQL in `data_dir/postgres`, started on entry and let go on exit."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "postgres"

    def holds_a_server(self) -> bool:
        """Whether a PostgreSQL data directory is here already (made by `start`, or restored)."""
        return (self.pgdata / "PG_VERSION").is_file()

    def start(self) -> str:
        """Start (or attach to) the server; returns the URL of the nachtwacht database."""
        with warnings.catch_warnings():
            # pgserver asks platformdirs for a runtime dir on import; without XDG_RUNTIME_DIR
            # (containers, services) platformdirs warns and falls back to /tmp, which is fine.
            warnings.simplefilter("ignore", UserWarning)
            import pgserver  # imported here: only the embedded mode needs it

        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            ensure_server_user()
            forget_dead_handles(self.pgdata)
            self._server = pgserver.postgres_server.get_server(self.pgdata, cleanup_mode="stop")
            admin_url = str(self._server.get_uri())
        except (OSError, subprocess.SubprocessError, AssertionError) as exc:
            raise DatabaseUnavailable(
                f"cannot start the embedded PostgreSQL in {self.pgdata}: {exc} "
                f"(see {self.pgdata / 'log'})"
            ) from exc
        self._ensure_database(admin_url)
        return database_url_with_name(admin_url, EMBEDDED_DATABASE)

    def _ensure_database(self, admin_url: str) -> None:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            exists = admin.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [EMBEDDED_DATABASE]
            ).fetchone()
            if exists is None:
                with contextlib.suppress(psycopg.errors.DuplicateDatabase):
                    admin.execute(f"CREATE DATABASE {EMBEDDED_DATABASE}")

    def stop(self) -> None:
        """Let go of the server; it stops when no other process of ours still uses it."""
        if self._server is not None:
            server, self._server = self._server, None
            server.cleanup()
            stop_unclaimed_server(self.pgdata, user=server.system_user)

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def process_exists(pid: int) -> bool:
    """Whether `pid` names a live process (a zombie, killed and not yet reaped, is not one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return True  # no /proc: the signal said it exists
    # The state follows the parenthesised command name, which may itself hold spaces.
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def forget_dead_handles(pgdata: Path) -> list[int]:
    """Take the pids of processes that no longer exist out of pgserver's handle list, so the last
    live process to let go stops the server. Returns the pids forgotten."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # as in `EmbeddedPostgres.start`
        from pgserver.postgres_server import PostgresServer

    handles = pgdata / _HANDLES_FILE
    # pgserver's own inter-process lock, the one it takes to add and remove handles. It has no
    # public name, and a lock of our own on its lock file would not do: a POSIX lock belongs to the
    # process, and releasing ours would release pgserver's too.
    with PostgresServer._lock:
        try:
            pids = json.loads(handles.read_text())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            logger.warning("cannot read %s (left as it is): %s", handles, exc)
            return []
        if not isinstance(pids, list):
            return []
        alive = [pid for pid in pids if isinstance(pid, int) and process_exists(pid)]
        dead = [pid for pid in pids if pid not in alive]
        if dead:
            handles.write_text(json.dumps(alive))
            logger.warning(
                "embedded PostgreSQL in %s: forgot processes that ended without letting go: %s",
                pgdata,
                dead,
            )
        return dead


def stop_unclaimed_server(pgdata: Path, *, user: str | None) -> bool:
    """Stop the PostgreSQL running in `pgdata` when no live process of ours holds it any more.

    pgserver stops only the postmaster it saw at start-up: when PostgreSQL was stopped under a
    running `serve` and started again by another command, the last one to let go left the new
    server running. Returns whether a server was stopped."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # as in `EmbeddedPostgres.start`
        import pgserver
        from pgserver.postgres_server import PostgresServer

    # pgserver makes its command functions (one per program it ships) at import time, so a type
    # checker cannot see them.
    pg_ctl = cast(Callable[..., str], getattr(pgserver, "pg_ctl"))  # noqa: B009
    forget_dead_handles(pgdata)
    with PostgresServer._lock:
        if _handles(pgdata):
            return False
        postmaster = _postmaster_pid(pgdata)
        if postmaster is None or not process_exists(postmaster):
            return False
        try:
            pg_ctl(["-w", "stop"], pgdata=pgdata, user=user)
        except (OSError, subprocess.SubprocessError) as exc:
            logger.warning("could not stop the embedded PostgreSQL in %s: %s", pgdata, exc)
            return False
        return True


def _handles(pgdata: Path) -> list[int]:
    try:
        pids = json.loads((pgdata / _HANDLES_FILE).read_text())
    except (OSError, ValueError):
        return []
    return [pid for pid in pids if isinstance(pid, int)] if isinstance(pids, list) else []


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, IndexError, ValueError):
        return None


@dataclass(frozen=True, kw_only=True)
class SessionBounds:
    """A pool's `lock_timeout` and `statement_timeout` in seconds (None: the server's own); the
    defaults are the API's request connections'."""

    lock_timeout_seconds: float | None = REQUEST_LOCK_TIMEOUT_SECONDS
    statement_timeout_seconds: float | None = REQUEST_STATEMENT_TIMEOUT_SECONDS

    def options(self) -> str:
        """The libpq `options` that set the bounds for the session (whole milliseconds)."""
        settings = (
            ("lock_timeout", self.lock_timeout_seconds),
            ("statement_timeout", self.statement_timeout_seconds),
        )
        return " ".join(
            f"-c {name}={max(1, round(seconds * 1000))}"
            for name, seconds in settings
            if seconds is not None
        )


def reconcile_bounds(requests: SessionBounds) -> SessionBounds:
    """The reconcile worker's pool's bounds: the requests' lock timeout, no statement timeout
    (see the module's docstring)."""
    return SessionBounds(
        lock_timeout_seconds=requests.lock_timeout_seconds, statement_timeout_seconds=None
    )


def bounded_options(conninfo: str, bounds: SessionBounds) -> str:
    """The libpq `options` that set `bounds`, followed by `conninfo`'s own: of two values of one
    setting PostgreSQL keeps the last, so a `-c lock_timeout=…` in the URL wins (and given as an
    argument, `options` would replace the URL's)."""
    own = str(conninfo_to_dict(conninfo).get("options") or "").strip()
    return f"{bounds.options()} {own}".strip()


def bounded_conninfo(conninfo: str, bounds: SessionBounds | None) -> str:
    """`conninfo` with `bounds` set for the session (`bounded_options`)."""
    if bounds is None:
        return conninfo
    params = conninfo_to_dict(conninfo)
    params["options"] = bounded_options(conninfo, bounds)
    return make_conninfo("", **params)


def told_something(conn: psycopg.Connection[Any]) -> bool:
    """Whether an idle connection has anything to read, without waiting: its server's last words
    and the end of the socket when the session was ended, else (almost always) nothing."""
    if conn.closed:
        return True
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class CutConnectionCheck:
    """The pool's look at a connection before it hands it out (see the module's docstring):
    raises when the connection is dead, so the pool throws it away and gives the request another;
    the first dead one found has the pool check its other idle connections."""

    def __init__(self) -> None:
        self.pool: ConnectionPool[Any] | None = None

    def __call__(self, conn: psycopg.Connection[Any]) -> None:
        if not told_something(conn):
            return
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            logger.warning(
                "a database connection was ended by the server (%s): checking the pool's other"
                " idle connections; the request takes a new one",
                first_line(exc),
            )
            if self.pool is not None:
                self.pool.check()
            raise


def open_pool(
    database_url: str,
    *,
    min_size: int = 1,
    max_size: int = 10,
    timeout: float = POOL_WAIT_SECONDS,
    bounds: SessionBounds | None = None,
    application_name: str | None = None,
) -> ConnectionPool[Any]:
    """A psycopg 3 pool whose rows are dicts; fails with DatabaseUnavailable if nothing answers.
    A request waits at most `timeout` seconds for a connection (then `PoolTimeout`: a 503).
    Its connections go to the newest primary of the URL's hosts, never to a fenced one, and one
    its server has ended is not handed out (`CutConnectionCheck`). `bounds`: the lock and
    statement timeouts every connection is opened with (the API's pool; see the docstring).
    `application_name`: how its sessions name themselves (a serving replica's,
    `control_plane.replica_sessions`)."""
    fence = fence_for(database_url)
    cut_connections = CutConnectionCheck()

    def conninfo() -> str:
        # Called for each new connection: the host last seen at the newest position first.
        return bounded_conninfo(fence.conninfo(), bounds)

    def configure(conn: psycopg.Connection[Any]) -> None:
        fence.check(conn)
        if application_name is not None:
            # Only once the fence has admitted the server (`replica_sessions`).
            name_session(conn, application_name)

    pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
        conninfo,
        configure=configure,
        check=cut_connections,
        reconnect_timeout=RECONNECT_SECONDS,
        min_size=min_size,
        max_size=max_size,
        # Autocommit: a lone read is its own statement, and every write names its
        # transaction explicitly with `conn.transaction()`.
        kwargs={"row_factory": dict_row, "autocommit": True},
        open=False,
        name="nachtwacht",
        timeout=timeout,
    )
    cut_connections.pool = pool
    try:
        pool.open(wait=True, timeout=POOL_OPEN_SECONDS)
    except PoolTimeout as exc:
        pool.close()
        # A server that answers but is fenced is the reason to give, not the pool's wait.
        why = fence.last_refusal or first_line(exc)
        raise DatabaseUnavailable(f"cannot connect to the database: {why}") from exc
    return pool


@contextlib.contextmanager
def connect(database_url: str) -> Iterator[psycopg.Connection[DictRow]]:
    """One connection outside a pool, for the admin commands."""
    try:
        connection = fence_for(database_url).connect(row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot connect to the database: {first_line(exc)}") from exc
    with connection:
        yield connection
