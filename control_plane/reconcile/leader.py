"""One active worker among the replicas: a PostgreSQL session-level advisory lock.

The lock belongs to one dedicated connection, outside the pool. The replica holding it works;
the others try again on every tick. When the holder dies — process killed, host gone, connection
cut — PostgreSQL ends its session and releases the lock, and the next replica to try takes over.

A holder that hangs (a stopped or frozen process) keeps its session, and so the lock: its kernel
still answers the connection. So the lock's session is named after its replica
(`application_name`), and a replica refused the lock remembers which session holds it
(`holder`), for the worker to say who to end when no pass finishes.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass

import psycopg

from control_plane.database_fence import fenced_connect
from control_plane.replica_sessions import reconcile_session_name

__all__ = ["RECONCILE_LOCK_KEY", "LeaderLock", "LockHolder"]

# An arbitrary 64-bit key that names "the reconcile worker" in pg_locks.
RECONCILE_LOCK_KEY = 0x6E61_6368_7477_6163

# The session holding a session-level advisory lock on a bigint key: PostgreSQL splits the key
# into classid (high 32 bits) and objid (low 32 bits).
_HOLDER_SQL = """
SELECT l.pid, a.application_name
  FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
 WHERE l.locktype = 'advisory' AND l.granted
   AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND ((l.classid::bigint << 32) | l.objid::bigint) = %s
"""

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class LockHolder:
    """The database session that held the lock when this replica was refused it."""

    pid: int
    application_name: str  # empty when the holder did not name itself

    def describe(self) -> str:
        name = self.application_name or "no application_name"
        return f"database session {self.pid} ({name})"


class LeaderLock:
    def __init__(
        self, database_url: str, *, key: int = RECONCILE_LOCK_KEY, identity: str | None = None
    ) -> None:
        self._database_url = database_url
        self._key = key
        self._application_name = reconcile_session_name(identity or "replica")
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        # Who held the lock at the last refused try; None while this replica holds it, or
        # when the holder could not be read.
        self.holder: LockHolder | None = None

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
        self.holder = None
        try:
            conn = fenced_connect(
                self._database_url, autocommit=True, application_name=self._application_name
            )
        except psycopg.Error as exc:
            logger.warning("reconcile worker cannot reach the database: %s", exc)
            return False
        try:
            row = conn.execute("SELECT pg_try_advisory_lock(%s)", [self._key]).fetchone()
            if row is None or not row[0]:
                self.holder = _holder(conn, self._key)
                conn.close()
                return False
        except psycopg.Error:
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


def _holder(conn: psycopg.Connection[tuple[object, ...]], key: int) -> LockHolder | None:
    row = conn.execute(_HOLDER_SQL, [key]).fetchone()
    if row is None:
        return None  # released between the try and this read
    pid, name = row
    return LockHolder(pid=int(str(pid)), application_name=str(name or ""))
