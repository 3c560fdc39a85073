"""Is the database at the newest schema? Answered without Alembic.

Every command but `migrate` (and `serve`, which migrates first unless told not to) only needs to
refuse a database that is not at the head revision. Importing Alembic and SQLAlchemy for that
costs each command half a second of start-up, so the check reads Alembic's own table with psycopg
and takes the head from the migration files' names: `revNNNN_<name>.py` holds revision
`NNNN_<name>`, each file follows the one before it, and the highest number is the head
(`tests/control_plane/test_schema_version.py` holds every file to that and compares the answer
with Alembic's).

A database at a revision newer than this release's head is served too: a newer release migrated
it in a rolling upgrade, and its migrations only add to what this release reads and writes
(expand-only; whatever it removes waits a release). Its replicas and this release's serve side by
side until the last replica is upgraded; one of this release's that restarts meanwhile must start.
"""

from __future__ import annotations

import re
from pathlib import Path

import psycopg

from control_plane.database import first_line
from control_plane.errors import DatabaseUnavailable

__all__ = [
    "VERSIONS_DIR",
    "current_revision",
    "head_revision",
    "is_newer_than_head",
    "require_head",
]

VERSIONS_DIR = Path(__file__).resolve().parent / "migrations" / "versions"
_FILE_NAME = re.compile(r"rev(\d{4}_[a-z0-9_]+)\.py", re.ASCII)
_REVISION = re.compile(r"(\d{4})_[a-z0-9_]+", re.ASCII)


def head_revision() -> str:
    """The newest revision among the migration files."""
    revisions = sorted(
        match.group(1)
        for path in VERSIONS_DIR.iterdir()
        if (match := _FILE_NAME.fullmatch(path.name)) is not None
    )
    if not revisions:
        raise DatabaseUnavailable(f"no migration files in {VERSIONS_DIR}")
    return revisions[-1]


def current_revision(database_url: str) -> str | None:
    """The revision Alembic recorded in the database; None for a database never migrated."""
    try:
        with psycopg.connect(database_url) as conn:
            known = conn.execute("SELECT to_regclass('alembic_version') IS NOT NULL").fetchone()
            if known is None or not known[0]:
                return None
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except psycopg.Error as exc:
        raise DatabaseUnavailable(f"cannot read the schema's revision: {first_line(exc)}") from exc
    return None if row is None else str(row[0])


def is_newer_than_head(revision: str | None) -> bool:
    """Whether `revision` is a later one than every migration file here (a newer release's)."""
    found = None if revision is None else _REVISION.fullmatch(revision)
    head = _REVISION.fullmatch(head_revision())
    return found is not None and head is not None and int(found.group(1)) > int(head.group(1))


def require_head(database_url: str) -> None:
    """Refuse to work on a database that is behind the newest revision (or is not one of ours);
    one a newer release migrated is served."""
    current = current_revision(database_url)
    head = head_revision()
    if current != head and not is_newer_than_head(current):
        raise DatabaseUnavailable(
            f"the database is at revision {current or '(none)'}, not {head}: "
            "run `nachtwacht control migrate` first"
        )
