"""One active worker among the replicas: a PostgreSQL session-level advisory lock.

The lock belongs to one dedicated connection, outside the pool. The replica holding it works;
the others try again on every tick. When the holder dies — process killed, host gone, connection
cut — PostgreSQL ends its session and releases the lock, and the next replica to try takes over.
"""

from __future__ import annotations

import contextlib
import logging

import psycopg

from control_plane.database_fence import fenced_connect

__all__ = ["RECONCILE_LOCK_KEY", "LeaderLock"]

# An arbitrary 64-bit key that names "the reconcile worker" in pg_locks.
RECONCILE_LOCK_KEY = 0x6E61_6368_7477_6163

logger = logging.getLogger(__name__)


class LeaderLock:
    def __init__(self, database_url: str, *, key: int = RECONCILE_LOCK_KEY) -> None:
        self._database_url = database_url
        self._key = key
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None

    @property
    def held(self) -> bool:
        return self._conn is not None

    def try_acquire(self) -> bool:
        """True while this replica is the worker: keeps the lock, or takes it when it is free."""
        if self._conn is not None:
            try:
                self._conn.execute("SELECT 1")
                return True
            except psycopg.Error as exc:
                logger.warning("reconcile worker lost its lock connection: %s", exc)
                self._drop()
        try:
            conn = fenced_connect(self._database_url, autocommit=True)
        except psycopg.Error as exc:
            logger.warning("reconcile worker cannot reach the database: %s", exc)
            return False
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", [self._key]).fetchone()
        except psycopg.Error:
            conn.close()
            return False
        if row is None or not row[0]:
            conn.close()
            return False
        self._conn = conn
        return True

    def release(self) -> None:
        """Give the lock up at once. Closing the session would release it too, but only when the
        server has ended the session, a moment after the close returns: another replica asking
        in that moment would find it still held."""
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.execute("SELECT pg_advisory_unlock(%s)", [self._key])
        self._drop()

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
