"""The thread that keeps one worker's `AnswerMemory` exact: it reads the change feed.

Each read is one statement on the feed's own connection (not the pool's: a busy pool must not
delay it): the snapshot's `xmin` (the oldest transaction still running) and every change row
written by a transaction at or after the previous read's `xmin`. A transaction below that
`xmin` had ended before the previous read began, so its rows were visible to that read; any
other may have committed since, in whatever order its id was handed out. Rows stay above the
horizon as long as any older transaction of the server runs (a backup, a long report, a session
of another database on the same server), so the reader keeps the ids of the transactions it has
applied above the horizon and skips their rows: a transaction's rows become visible together,
at its commit, so one applied has nothing left to show. Without that, one open transaction
anywhere on the server would make every read forget everything again after a platform-wide
change.

A failed read (the database is away, a statement timeout) makes the memory lapse: nothing is
answered from memory until a read succeeds again, and that read starts a new horizon over an
empty memory. The writes that follow a read — the sightings of answers given from memory, the
pruning — are bookkeeping: once the read's changes are applied the memory is exact, so when one
of them fails it is logged and tried again with the next read (the sightings are kept), and the
memory keeps answering. (It used to lapse: a sightings batch that waited for another worker's
lock emptied the memory, and every request went to the database until it filled again.)

Rows are pruned once every worker has had time to read them: below a horizon this thread saw at
least `PRUNE_AFTER_SECONDS` ago (a live worker reads at least every `FRESHNESS_SECONDS`; one
that paused longer forgets everything when it resumes).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from uuid import UUID

import psycopg
from psycopg.rows import dict_row

from control_plane.answers_cache.memory import POLL_SECONDS, AnswerMemory, Changes
from control_plane.answers_cache.seen import SeenRecorder
from control_plane.background import LoopThread
from control_plane.database import SessionBounds, bounded_options
from control_plane.database_fence import fenced_connect
from control_plane.repeated_warning import RepeatedWarning, UnwrittenBatch
from control_plane.types import Connection

__all__ = ["PRUNE_AFTER_SECONDS", "ChangeFeed", "feed_running", "read_changes"]

logger = logging.getLogger(__name__)

PRUNE_AFTER_SECONDS = 60.0
# The feed's reads are quick; one that is not gives up and the next read starts over.
_BOUNDS = SessionBounds(lock_timeout_seconds=None, statement_timeout_seconds=1.0)

_READ = """
SELECT one.horizon, c.xid, c.scope, c.subject
  FROM (SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon) one
  LEFT JOIN LATERAL (
        SELECT DISTINCT xid::text AS xid, scope, subject FROM answer_changes
         WHERE xid >= %(since)s::text::xid8
       ) c ON true
"""
_PRUNE = "DELETE FROM answer_changes WHERE xid < %(below)s::text::xid8"


def read_changes(
    conn: Connection, since: str | None, applied: frozenset[int] = frozenset()
) -> tuple[str, Changes, frozenset[int]]:
    """The new horizon; the changes of every transaction at or after `since` (None: none) but
    those in `applied`; and the transactions applied so far that the next read may see again
    (at or above the new horizon)."""
    rows = conn.execute(_READ, {"since": since}).fetchall()
    agents: set[UUID] = set()
    orgs: set[UUID] = set()
    everything = False
    seen = set(applied)
    for row in rows:
        if row["xid"] is None:
            continue
        xid = int(row["xid"])
        seen.add(xid)
        if xid in applied:
            continue
        if row["scope"] == "agent":
            agents.add(row["subject"])
        elif row["scope"] == "org":
            orgs.add(row["subject"])
        elif row["scope"] == "all":
            everything = True
    horizon: str = rows[0]["horizon"]
    still_above = frozenset(xid for xid in seen if xid >= int(horizon))
    changes = Changes(agents=frozenset(agents), orgs=frozenset(orgs), everything=everything)
    return horizon, changes, still_above


# While the feed cannot be read, its warning is repeated this often (real seconds).
FAILURE_REPEAT_SECONDS = 60.0


class ChangeFeed:
    """Reads the feed every `interval_seconds` into `memory`, writing `seen`'s batches."""

    def __init__(
        self,
        database_url: str,
        memory: AnswerMemory,
        seen: SeenRecorder,
        *,
        interval_seconds: float = POLL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
        application_name: str | None = None,
    ) -> None:
        self._url = database_url
        self._named = {} if application_name is None else {"application_name": application_name}
        self._monotonic = monotonic
        self._memory = memory
        self._seen = seen
        self._interval = interval_seconds
        self._loop = LoopThread("nachtwacht-answer-feed")
        self._conn: Connection | None = None
        self._horizon: str | None = None
        self._applied: frozenset[int] = frozenset()  # transactions at or above the horizon
        self._horizons: deque[tuple[float, str]] = deque()
        self._prune_below: str | None = None
        self._last_prune = monotonic()
        # While the feed cannot be read: a read every half second would otherwise write two
        # lines a second per worker for a whole outage.
        self._not_read = RepeatedWarning(FAILURE_REPEAT_SECONDS, monotonic=monotonic)
        # The same for the sightings' batch (a lock held on agents' rows fails it at every read).
        self._sightings = UnwrittenBatch(
            logger,
            "sightings of answers from memory",
            "the next read",
            FAILURE_REPEAT_SECONDS,
            monotonic=monotonic,
        )

    def start(self) -> None:
        self._loop.start(self._run)

    def stop(self) -> None:
        self._loop.stop()
        self._memory.lapse()
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._seen.write(self._conn)
            self._conn.close()
            self._conn = None

    def read_once(self) -> None:
        """One read: forget what changed, write the sightings, prune now and then."""
        try:
            conn = self._connection()
            writes_before = self._memory.writes.count()
            started = self._monotonic()
            horizon, changes, applied = read_changes(conn, self._horizon, self._applied)
            self._memory.apply(changes, read_started=started, writes_before=writes_before)
            self._horizon, self._applied = horizon, applied
            self._horizons.append((started, horizon))
        except psycopg.Error as exc:
            self._memory.lapse()
            self._horizon, self._applied = None, frozenset()
            self._horizons.clear()
            self._prune_below = None
            self._close()
            self._say_not_read(exc)
            return
        failed_for = self._not_read.ended()
        if failed_for is not None:
            logger.warning(
                "answer feed read again after %.0f s (answers come from memory again)", failed_for
            )
        try:
            self._seen.write(conn)
            self._prune(conn, started)
        except psycopg.Error as exc:
            if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self._close()  # the next read opens another (and lapses if it cannot)
            self._sightings.failed(exc)
            return
        self._sightings.written()

    def _say_not_read(self, exc: psycopg.Error) -> None:
        """The first failure at once, then at most every `FAILURE_REPEAT_SECONDS` while it lasts."""
        repeat = self._not_read.holds()
        if repeat is None:
            return
        if repeat.first:
            logger.warning("answer feed not read (answers come from the database): %s", exc)
        else:
            logger.warning(
                "answer feed still not read after %.0f s (answers come from the database): %s",
                repeat.held_seconds,
                exc,
            )

    def _close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _connection(self) -> Connection:
        if self._conn is None or self._conn.closed:
            self._conn = fenced_connect(
                self._url,
                autocommit=True,
                row_factory=dict_row,
                connect_timeout=2,
                options=bounded_options(self._url, _BOUNDS),
                **self._named,
            )
        return self._conn

    def _prune(self, conn: Connection, now: float) -> None:
        while self._horizons and now - self._horizons[0][0] >= PRUNE_AFTER_SECONDS:
            self._prune_below = self._horizons.popleft()[1]
        if self._prune_below is not None and now - self._last_prune >= PRUNE_AFTER_SECONDS:
            conn.execute(_PRUNE, {"below": self._prune_below})
            self._last_prune = now

    def _run(self) -> None:
        while not self._loop.stopping:
            self.read_once()
            self._loop.wait(self._interval)


@contextlib.contextmanager
def feed_running(
    database_url: str,
    memory: AnswerMemory,
    seen: SeenRecorder,
    *,
    application_name: str | None = None,
) -> Iterator[None]:
    """The feed's thread for a `with` block (one per serving worker); its session is named
    `application_name`."""
    feed = ChangeFeed(database_url, memory, seen, application_name=application_name)
    feed.start()
    try:
        yield
    finally:
        feed.stop()
