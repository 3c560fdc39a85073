"""Where the database is: an embedded PostgreSQL in a data directory, or any PostgreSQL 15+ by URL.

The embedded server (`pgserver`) is started in `<data dir>/postgres`. Several processes may use one
data directory at once — `nachtwacht control serve` and the admin commands run beside it: pgserver
serialises start-up with a file lock, attaches to a server that is already running, and only the
last process to let go stops it.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import DictRow, dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from control_plane.errors import DatabaseUnavailable

__all__ = [
    "DATABASE_URL_ENV",
    "EmbeddedPostgres",
    "database_url_with_name",
    "first_line",
    "open_pool",
]

DATABASE_URL_ENV = "NACHTWACHT_DATABASE_URL"
EMBEDDED_DATABASE = "nachtwacht"

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


class EmbeddedPostgres:
    """A real PostgreSQL in `data_dir/postgres`, started on entry and let go on exit."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "postgres"

    def start(self) -> str:
        """Start (or attach to) the server; returns the URL of the nachtwacht database."""
        with warnings.catch_warnings():
            # pgserver asks platformdirs for a runtime dir on import; without XDG_RUNTIME_DIR
            # (containers, services) platformdirs warns and falls back to /tmp, which is fine.
            warnings.simplefilter("ignore", UserWarning)
            import pgserver  # imported here: only the embedded mode needs it

        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
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
            self._server.cleanup()
            self._server = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def open_pool(
    database_url: str, *, min_size: int = 1, max_size: int = 10, timeout: float = 30.0
) -> ConnectionPool[Any]:
    """A psycopg 3 pool whose rows are dicts; fails with DatabaseUnavailable if nothing answers."""
    pool: ConnectionPool[psycopg.Connection[DictRow]] = ConnectionPool(
        database_url,
        min_size=min_size,
        max_size=max_size,
        # Autocommit: a lone read is its own statement, and every write names its
        # transaction explicitly with `conn.transaction()`.
        kwargs={"row_factory": dict_row, "autocommit": True},
        open=False,
        name="nachtwacht",
        timeout=timeout,
    )
    try:
        pool.open(wait=True, timeout=15)
    except PoolTimeout as exc:
        pool.close()
        raise DatabaseUnavailable(f"cannot connect to the database: {first_line(exc)}") from exc
    return pool


@contextlib.contextmanager
def connect(database_url: str) -> Iterator[psycopg.Connection[DictRow]]:
    """One connection outside a pool, for the admin commands."""
    try:
        connection = psycopg.connect(database_url, row_factory=dict_row)
    except psycopg.OperationalError as exc:
        raise DatabaseUnavailable(f"cannot connect to the database: {first_line(exc)}") from exc
    with connection:
        yield connection
