"""One reconcile pass: missed slots, notification decisions, webhook deliveries, and last a
bounded share of the retention walk (history older than the retention setting removed).

A pass takes `now` from its caller (the worker loop reads the clock) and is idempotent: it works
from the stored progress, each step is safe to repeat, and a pass interrupted half-way is finished
by the next one. Windows are reconciled a `settle` margin after they close, so a claim that a
replica with a slightly slower clock still accepted is on record first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from control_plane.errors import ConfigurationError
from control_plane.notifications.delivery import AttemptOutcome, WebhookSender
from control_plane.reconcile.data import FIRST_LOOKBACK, advance, read_progress, record_pass
from control_plane.reconcile.missed import record_missed_slots
from control_plane.reconcile.outlived import end_outlived_claims
from control_plane.reconcile.review import ReviewResult, review_closed_slots
from control_plane.retention import RetentionBatches, RetentionTick, RetentionWalk
from control_plane.rollout.services import RolloutService
from control_plane.settings.services import read_settings
from control_plane.types import Pool

__all__ = ["PassReport", "PassSettings", "ReconcilePass"]

# One transaction reconciles at most this much time, so catching up after a long outage is a
# series of bounded steps, each recorded in the progress row.
CATCH_UP_STEP = timedelta(hours=6)


@dataclass(frozen=True, kw_only=True)
class PassSettings:
    settle: timedelta = timedelta(minutes=1)
    outcome_grace: timedelta = timedelta(minutes=60)
    retention: RetentionBatches = field(default_factory=RetentionBatches)

    def __post_init__(self) -> None:
        for name in ("settle", "outcome_grace"):
            value = getattr(self, name)
            if not isinstance(value, timedelta) or value < timedelta(0):
                raise ConfigurationError(f"{name}: {value!r} must be a non-negative timedelta")


@dataclass(frozen=True, kw_only=True)
class PassReport:
    reconciled_until: datetime
    missed: int
    review: ReviewResult
    # Claims still open after their window and their token's lifetime, ended as interrupted.
    claims_ended: int = 0
    deliveries: list[AttemptOutcome] = field(default_factory=list)
    retention: RetentionTick = field(default_factory=RetentionTick)


class ReconcilePass:
    def __init__(
        self,
        pool: Pool,
        *,
        sender: WebhookSender,
        settings: PassSettings | None = None,
        identity: str = "reconcile",
    ) -> None:
        self._pool = pool
        self._sender = sender
        self._settings = settings or PassSettings()
        self._identity = identity
        self._retention = RetentionWalk(pool, batches=self._settings.retention, identity=identity)

    def run(self, now: datetime) -> PassReport:
        until = now - self._settings.settle
        missed = 0
        with self._pool.connection() as conn:
            platform = read_settings(conn)
            window = timedelta(minutes=platform.catch_up_minutes)
            start = read_progress(conn).reconciled_until
            if start is None:
                start = until - FIRST_LOOKBACK
            while start < until:
                step_end = min(until, start + CATCH_UP_STEP)
                with conn.transaction():
                    missed += len(
                        record_missed_slots(
                            conn,
                            timezone=platform.timezone,
                            window=window,
                            after=start,
                            until=step_end,
                            now=now,
                        )
                    )
                    advance(conn, step_end)
                start = step_end
            with conn.transaction():
                claims_ended = end_outlived_claims(conn, window=window, until=until, now=now)
            review = review_closed_slots(
                conn,
                zone=platform.zone,
                window=window,
                until=until,
                outcome_grace=self._settings.outcome_grace,
                now=now,
            )
        # Halt releases that fail too often, promote the soaked ones.
        RolloutService(self._pool).advance(now)
        deliveries = self._sender.deliver_due(now)
        with self._pool.connection() as conn, conn.transaction():
            record_pass(conn, at=now, by=self._identity)
        # Last, and after the pass is on record: removing old history never delays the rest.
        retention = self._retention.tick(now)
        return PassReport(
            reconciled_until=max(start, until),
            missed=missed,
            review=review,
            deliveries=deliveries,
            claims_ended=claims_ended,
            retention=retention,
        )
