"""The reconcile loop that runs in every replica; the advisory lock makes one of them work.

Every `interval` product seconds (the clock object decides how long that is in real time) the
loop tries to be the worker and, if it is, runs one pass with `now` read from the clock once.
It is never on the claim or dispatch path: it only reads what those wrote and adds its own rows.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

import psycopg

from control_plane.background import LoopThread
from control_plane.liveness.clock_watch import ClockWatch
from control_plane.liveness.marks import liveness_gap, mark_alive
from control_plane.notifications.addresses import WebhookAddressPolicy
from control_plane.notifications.delivery import DeliveryPolicy, WebhookSender
from control_plane.reconcile.leader import LeaderLock
from control_plane.reconcile.passes import PassReport, PassSettings, ReconcilePass
from control_plane.registry import replica_identity
from control_plane.types import Pool
from ground.clock import Clock

__all__ = ["ReconcileWorker"]

DEFAULT_INTERVAL = timedelta(seconds=30)
# However fast a fake clock runs, the loop does not poll the database more often than this.
MIN_REAL_WAIT_SECONDS = 0.1
# A replica refused the lock says so when no pass has finished for this long (a pass every 30
# seconds is the rule), and again at most this often while that lasts: the holder may be hung.
STALE_PASS = timedelta(minutes=5)

logger = logging.getLogger(__name__)


class ReconcileWorker:
    def __init__(
        self,
        pool: Pool,
        clock: Clock,
        database_url: str,
        *,
        interval: timedelta = DEFAULT_INTERVAL,
        pass_settings: PassSettings | None = None,
        delivery: DeliveryPolicy | None = None,
        sender: WebhookSender | None = None,
        identity: str | None = None,
        addresses: WebhookAddressPolicy | None = None,
        clock_watch: ClockWatch | None = None,
    ) -> None:
        self._clock = clock
        self._clock_watch = clock_watch or ClockWatch()
        self._pool = pool
        self._interval = interval
        # The start of this process's current stretch of liveness marks.
        self._alive_since: datetime | None = None
        self.identity = identity or replica_identity()
        self._lock = LeaderLock(database_url, identity=self.identity)
        # Since when this replica has been refused the lock, and when it last said so.
        self._refused_since: datetime | None = None
        self._stale_warned_at: datetime | None = None
        self._sender = sender or WebhookSender(pool, delivery, addresses=addresses)
        self._pass = ReconcilePass(
            pool, sender=self._sender, settings=pass_settings, identity=self.identity
        )
        self._loop = LoopThread("nachtwacht-reconcile")
        self.last_report: PassReport | None = None

    @property
    def is_leader(self) -> bool:
        return self._lock.held

    def mark_alive(self) -> None:
        """Record that this process is up (every replica, leader or not): a window no replica
        marked was our outage, never the customer's agent being offline. The marks are written by
        this process's clock, which is compared with the database server's on the way."""
        try:
            with self._pool.connection() as conn:
                with conn.transaction():
                    self._alive_since = mark_alive(
                        conn,
                        replica=self.identity,
                        stretch_started=self._alive_since,
                        now=self._clock.now(),
                        gap=liveness_gap(self._clock.speed),
                    )
                self._clock_watch.measure(conn, self._clock)
        except psycopg.Error as exc:
            if self._loop.stopping:
                return  # the pool was closed to wake this wait: the process is stopping
            # The hole this leaves is the record of the outage.
            logger.warning("liveness mark not written: %s", exc)

    def tick(self) -> PassReport | None:
        """Mark this process alive, be the worker if possible and run one pass; None when another
        replica is the worker."""
        self.mark_alive()
        if self._loop.stopping:
            return None
        if not self._lock.try_acquire():
            self._warn_of_a_stale_holder()
            return None
        self._refused_since = None
        try:
            report = self._pass.run(self._clock.now())
        except psycopg.Error as exc:
            if self._loop.stopping:
                # The pool was closed under it; the pass is idempotent and the next worker's
                # pass does what this one left.
                logger.info("reconcile pass ended partway: this replica is stopping")
                return None
            # The next tick retries; the pass is idempotent. A broken lock connection shows there.
            logger.warning("reconcile pass failed, retrying on the next tick: %s", exc)
            return None
        self.last_report = report
        return report

    def _warn_of_a_stale_holder(self) -> None:
        """Another session holds the lock: when no pass has finished for `STALE_PASS`, say which
        session holds it. A holder that hangs (a stopped or frozen process) keeps its session
        alive, so no replica takes over and nothing else names it."""
        holder = self._lock.holder
        if holder is None:
            return
        now = self._clock.now()
        if self._refused_since is None:
            self._refused_since = now
        if now - self._refused_since < STALE_PASS:
            return  # e.g. the holder's first pass on a new database is still under way
        if self._stale_warned_at is not None and now - self._stale_warned_at < STALE_PASS:
            return
        try:
            with self._pool.connection() as conn:
                row = conn.execute(
                    "SELECT last_pass_at, last_pass_by FROM reconcile_progress"
                ).fetchone()
        except psycopg.Error:
            return  # the database is away: the liveness mark's warning says so
        if row is None or row["last_pass_at"] is None:
            since = "no pass has finished yet"
        elif now - row["last_pass_at"] < STALE_PASS:
            return
        else:
            since = (
                f"no pass has finished since {row['last_pass_at'].isoformat()}"
                f" (by {row['last_pass_by']})"
            )
        self._stale_warned_at = now
        logger.warning(
            "reconcile worker: %s holds the worker's lock but %s; if that replica is hung, end"
            " its session (SELECT pg_terminate_backend(%d)) and a running replica takes over at"
            " its next tick",
            holder.describe(),
            since,
            holder.pid,
        )

    def start(self) -> None:
        self._loop.start(self._run)

    def ask_to_stop(self) -> None:
        """Ask the loop to stop; `stop` waits for it. Between the two the owner of the pool may
        close it, which wakes a wait for a connection at once (the database may be down)."""
        self._loop.ask_to_stop()

    def stop(self) -> None:
        self._loop.stop()
        self._lock.release()
        self._sender.close()

    def _run(self) -> None:
        while not self._loop.stopping:
            try:
                self.tick()
            except Exception:  # the loop must outlive any one pass; the error is logged
                logger.exception("reconcile pass failed unexpectedly")
            wait = self._clock.real_seconds(self._interval.total_seconds())
            self._loop.wait(max(MIN_REAL_WAIT_SECONDS, wait))
