"""Apply, undo and check the schema's migrations (Alembic, written as SQL)."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Connection, create_engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from control_plane import schema_version
from control_plane.database import database_url_with_name, first_line
from control_plane.database_fence import fence_for, fenced_connect
from control_plane.errors import DatabaseUnavailable

__all__ = [
    "LOCK_TIMEOUT_SECONDS",
    "check_migrations",
    "current_revision",
    "downgrade",
    "head_revision",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

# How long a migration's statement waits for a table's lock before the whole migration gives up
# (and is rolled back). A statement that changes a table waits for every query already using it,
# and while it waits every later query of that table waits behind it: without a bound, one long
# report would stop every replica's claims for as long as it runs. Replicas keep serving on the
# schema they have; the migration is simply run again.
LOCK_TIMEOUT_SECONDS = 5.0


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


@contextlib.contextmanager
def _alembic_connection(database_url: str) -> Iterator[Connection]:
    # SQLAlchemy is only Alembic's carrier here: the connection is psycopg's, the SQL is ours.
    engine = create_engine(
        "postgresql+psycopg://",
        # Fenced as the pool is: a migration never runs on a demoted primary.
        creator=lambda: fenced_connect(database_url),
        poolclass=NullPool,
    )
    try:
        # No transaction around the revisions: each runs in its own (`migrations/env.py`).
        with engine.connect() as connection:
            yield connection
    except (SQLAlchemyError, psycopg.Error) as exc:
        cause = getattr(exc, "orig", exc)
        if isinstance(cause, psycopg.errors.LockNotAvailable):
            raise DatabaseUnavailable(
                "migration gave up: a table it changes stayed in use by another transaction "
                f"longer than the lock timeout ({first_line(cause)}); that revision and the ones "
                "after it were not applied (those before it were) and every replica keeps "
                "serving: run the migration again (when the long query has ended)"
            ) from exc
        if isinstance(cause, psycopg.errors.ReadOnlySqlTransaction):
            raise DatabaseUnavailable(
                "migration failed: the database is a read-only standby (in recovery): migrate "
                "the primary, or give every host with target_session_attrs=read-write "
                f"({first_line(cause)})"
            ) from exc
        if isinstance(cause, psycopg.errors.UniqueViolation):
            raise DatabaseUnavailable(
                f"migration failed: {_with_detail(cause)}: rows already in the database break a"
                " rule that revision adds, and it was not applied (nor the ones after it; those"
                " before it were) — the upgrade notes of this release say which rows and what to"
                " do; then run the migration again"
            ) from exc
        raise DatabaseUnavailable(f"migration failed: {_with_detail(cause)}") from exc
    finally:
        engine.dispose()


def _with_detail(cause: BaseException) -> str:
    """PostgreSQL's message and, where it gives one, its detail (which rows, which value)."""
    detail = cause.diag.message_detail if isinstance(cause, psycopg.Error) else None
    return first_line(cause) + (f" ({first_line(Exception(detail))})" if detail else "")


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def _run_config(connection: Connection, lock_timeout_seconds: float) -> Config:
    config = _config()
    config.attributes["connection"] = connection
    # Read by `migrations/env.py`, which sets it once it holds the migrations' own lock: the
    # wait for another replica's migration to finish is not bounded by it.
    config.attributes["lock_timeout_ms"] = max(1, round(lock_timeout_seconds * 1000))
    return config


def is_revision(text: str) -> bool:
    """Whether `migrate --revision` can go to `text`: `head`, or a revision of this release (its
    id, or a prefix of one id only)."""
    if text == "head":
        return True
    if not text.strip():
        return False
    try:
        return ScriptDirectory.from_config(_config()).get_revision(text) is not None
    except CommandError:  # unknown, or a prefix of several
        return False


def upgrade(
    database_url: str,
    revision: str = "head",
    *,
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
) -> None:
    """Apply every migration up to `revision` (default: all), each in its own transaction; each
    statement waits at most `lock_timeout_seconds` for a table's lock (see
    `LOCK_TIMEOUT_SECONDS`). A database a newer release already migrated further is left as it
    is (this release's files do not know its revision; it serves on it)."""
    if revision == "head" and schema_version.is_newer_than_head(
        schema_version.current_revision(database_url)
    ):
        return
    with _alembic_connection(database_url) as connection:
        command.upgrade(_run_config(connection, lock_timeout_seconds), revision)


def downgrade(
    database_url: str,
    revision: str,
    *,
    lock_timeout_seconds: float = LOCK_TIMEOUT_SECONDS,
) -> None:
    """Undo migrations down to `revision` (`base` undoes all)."""
    with _alembic_connection(database_url) as connection:
        command.downgrade(_run_config(connection, lock_timeout_seconds), revision)


def current_revision(database_url: str) -> str | None:
    with _alembic_connection(database_url) as connection:
        return MigrationContext.configure(connection).get_current_revision()


def check_migrations(database_url: str) -> list[str]:
    """Apply every migration to a new, empty database beside `database_url`, undo them all, apply
    them again, and drop that database. Returns the revisions applied, in order."""
    scratch = f"nachtwacht_migration_check_{secrets.token_hex(6)}"
    revisions = [
        script.revision for script in ScriptDirectory.from_config(_config()).walk_revisions()
    ]
    try:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{scratch}"')
    except psycopg.Error as exc:
        raise DatabaseUnavailable(
            f"cannot create a scratch database to check: {first_line(exc)}"
        ) from exc
    try:
        scratch_url = database_url_with_name(database_url, scratch)
        # The scratch database is new and holds nothing of the control plane's: on a server
        # restored to a point in time (its recovery target still set) it has no record of the
        # restore being finished, and on a server restored from `pg_dump` it names no cluster.
        # Neither is a reason to refuse it; a demoted primary still is.
        fence_for(scratch_url).allow_unfinished_restore()
        upgrade(scratch_url)
        downgrade(scratch_url, "base")
        upgrade(scratch_url)
        if current_revision(scratch_url) != head_revision():
            raise DatabaseUnavailable("migrations did not reach the head revision")
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
    return list(reversed(revisions))
