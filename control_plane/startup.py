"""Opening the database a command works on: the URL as given, or the embedded server started."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from control_plane.config import DatabaseLocation
from control_plane.database import EmbeddedPostgres
from control_plane.database_reach import reach

__all__ = ["opened_database"]


@contextlib.contextmanager
def opened_database(location: DatabaseLocation, *, migrate_to_head: bool) -> Iterator[str]:
    """Yields the database URL, migrated to head when asked. The embedded server is started (or
    joined, when `serve` already runs it) for the duration and let go afterwards. A database that
    cannot be reached is said here, before anything else is asked of it (`database_reach`)."""
    embedded = None
    if location.url is not None:
        url = location.url
    else:
        assert location.data_dir is not None
        embedded = EmbeddedPostgres(location.data_dir)
        url = embedded.start()
    try:
        reach(url)
        if migrate_to_head:
            # Alembic and SQLAlchemy cost a command that is given a URL half a second of start.
            from control_plane import migrate

            migrate.upgrade(url)
        yield url
    finally:
        if embedded is not None:
            embedded.stop()
