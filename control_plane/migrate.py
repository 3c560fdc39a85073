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
from sqlalchemy import Connection, create_engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from control_plane.database import database_url_with_name, first_line
from control_plane.database_fence import fenced_connect
from control_plane.errors import DatabaseUnavailable

__all__ = [
    "check_migrations",
    "current_revision",
    "downgrade",
    "head_revision",
    "upgrade",
]

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


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
        with engine.begin() as connection:
            yield connection
    except (SQLAlchemyError, psycopg.Error) as exc:
        raise DatabaseUnavailable(
            f"migration failed: {first_line(getattr(exc, 'orig', exc))}"
        ) from exc
    finally:
        engine.dispose()


def head_revision() -> str:
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def upgrade(database_url: str, revision: str = "head") -> None:
    """Apply every migration up to `revision` (default: all)."""
    with _alembic_connection(database_url) as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def downgrade(database_url: str, revision: str) -> None:
    """Undo migrations down to `revision` (`base` undoes all)."""
    with _alembic_connection(database_url) as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.downgrade(config, revision)


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
        upgrade(scratch_url)
        downgrade(scratch_url, "base")
        upgrade(scratch_url)
        if current_revision(scratch_url) != head_revision():
            raise DatabaseUnavailable("migrations did not reach the head revision")
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{scratch}" WITH (FORCE)')
    return list(reversed(revisions))
