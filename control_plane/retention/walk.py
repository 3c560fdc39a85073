"""One reconcile tick's share of the retention walk.

A walk starts when none is under way and the last one completed `every` ago (product time);
its cutoff (`now` minus retention_days) is fixed when it starts and stored, so a walk finished by
another replica after a failover removes exactly what the first one would have. It goes through
three phases, each over its owners in id order:

    agents          expired runs (their events first, in batches of their own), expired refusals,
                    expired unreachable reports
    organisations   expired notifications, expired slot reviews
    rounds          the caps' round counters older than the cutoff, then the sign-in failures of
                    addresses not tried for a day before the walk started (sign-in has forgotten
                    them; they do not wait for `retention_days`)

Every transaction removes at most `rows` rows of one table and adds them to the progress row's
counters; the position in the walk is saved after each group of owners.
A tick spends at most `transactions_per_tick` transactions and pauses between them; a tick that
stops half-way (its budget spent, the process killed, the database gone) leaves every row either
removed with its dependants or untouched, and the next tick goes on from the saved position.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Literal
from uuid import UUID

from control_plane.accounts.people import FAILURES_FORGOTTEN_AFTER
from control_plane.events.trail import Actor, record_action
from control_plane.retention import data
from control_plane.retention.batches import RetentionBatches
from control_plane.settings.services import read_settings
from control_plane.types import Connection, Pool
from ground.contract import format_instant

__all__ = ["RetentionTick", "RetentionWalk"]

logger = logging.getLogger(__name__)

RETENTION_ACTOR = Actor(kind="control_plane", name="retention")


@dataclass(frozen=True, kw_only=True)
class RetentionTick:
    """What one tick did; `completed` is True when it finished a walk."""

    transactions: int = 0
    runs: int = 0
    events: int = 0
    notifications: int = 0
    refusals: int = 0
    reviews: int = 0
    rounds: int = 0
    unreachable_reports: int = 0
    sign_in_failures: int = 0
    completed: bool = False

    @property
    def removed(self) -> int:
        return (
            self.runs
            + self.events
            + self.notifications
            + self.refusals
            + self.reviews
            + self.rounds
            + self.unreachable_reports
            + self.sign_in_failures
        )


class _BudgetSpent(Exception):
    """The tick has used its transactions; the walk goes on at the next tick."""


class _Tick:
    """One tick's transactions: counted against the budget, paused between, tallied."""

    def __init__(self, conn: Connection, batches: RetentionBatches, sleep: Callable[[float], None]):
        self.conn = conn
        self._batches = batches
        self._sleep = sleep
        self.transactions = 0
        self.removed: dict[str, int] = {}

    def run(self, work: Callable[[Connection], dict[str, int]]) -> dict[str, int]:
        """Run `work` in one transaction; it returns the rows it removed by progress column,
        which are added to the stored counters in the same transaction."""
        if self.transactions >= self._batches.transactions_per_tick:
            raise _BudgetSpent
        if self.transactions and self._batches.pause_seconds:
            self._sleep(self._batches.pause_seconds)
        with self.conn.transaction():
            removed = work(self.conn)
            for column, count in removed.items():
                data.add_removed(self.conn, column, count)
        self.transactions += 1
        for column, count in removed.items():
            self.removed[column] = self.removed.get(column, 0) + count
        return removed


class RetentionWalk:
    def __init__(
        self,
        pool: Pool,
        *,
        batches: RetentionBatches | None = None,
        identity: str = "reconcile",
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._pool = pool
        self._batches = batches or RetentionBatches()
        self._identity = identity
        self._sleep = sleep

    def tick(self, now: datetime) -> RetentionTick:
        with self._pool.connection() as conn:
            tick = _Tick(conn, self._batches, self._sleep)
            completed = False
            try:
                cutoff = self._walk_under_way(tick, now)
                if cutoff is not None:
                    completed = self._walk(tick, cutoff, now)
            except _BudgetSpent:
                pass
        result = RetentionTick(
            transactions=tick.transactions,
            runs=tick.removed.get("runs_removed", 0),
            events=tick.removed.get("events_removed", 0),
            notifications=tick.removed.get("notifications_removed", 0),
            refusals=tick.removed.get("refusals_removed", 0),
            reviews=tick.removed.get("reviews_removed", 0),
            rounds=tick.removed.get("rounds_removed", 0),
            unreachable_reports=tick.removed.get("unreachable_reports_removed", 0),
            sign_in_failures=tick.removed.get("sign_in_failures_removed", 0),
            completed=completed,
        )
        if result.removed:
            logger.info(
                "retention removed %d runs, %d events, %d notifications, %d claim refusals, "
                "%d slot reviews, %d round counters, %d unreachable reports, %d sign-in failures"
                " in %d transactions",
                result.runs,
                result.events,
                result.notifications,
                result.refusals,
                result.reviews,
                result.rounds,
                result.unreachable_reports,
                result.sign_in_failures,
                result.transactions,
            )
        return result

    def _walk_under_way(self, tick: _Tick, now: datetime) -> datetime | None:
        """The cutoff of the walk under way, starting one when it is time; None when not."""
        state = data.read_walk(tick.conn)
        if state.cutoff is not None:
            return state.cutoff
        if (
            state.last_completed_at is not None
            and now - state.last_completed_at < self._batches.every
        ):
            return None
        days = read_settings(tick.conn).retention_days
        cutoff = now - timedelta(days=days)

        def start(conn: Connection) -> dict[str, int]:
            data.start_walk(conn, now=now, cutoff=cutoff)
            return {}

        tick.run(start)
        logger.info("retention walk started: removing history from before %s", cutoff.isoformat())
        return cutoff

    def _walk(self, tick: _Tick, cutoff: datetime, now: datetime) -> bool:
        state = data.read_walk(tick.conn)
        phase, after = state.phase, state.after
        if phase == "agents":
            self._agents(tick, cutoff, after)
            phase, after = "organisations", None
        if phase == "organisations":
            self._organisations(tick, cutoff, after)
        self._rounds(tick, cutoff)
        self._sign_in_failures(tick, state.started_at or now)

        def complete(conn: Connection) -> dict[str, int]:
            removed = data.complete_walk(conn, now=now, by=self._identity)
            # On the trail (and so one line on the server's stderr): what the control plane
            # removed, and up to when.
            record_action(
                conn,
                kind="retention.completed",
                actor=RETENTION_ACTOR,
                at=now,
                data={"cutoff": format_instant(cutoff), "removed": removed},
            )
            return {}

        tick.run(complete)
        return True

    def _agents(self, tick: _Tick, cutoff: datetime, after: UUID | None) -> None:
        rows = self._batches.rows

        def remove(agents: Sequence[UUID]) -> None:
            while True:
                runs = data.expired_runs(tick.conn, agents=agents, cutoff=cutoff, limit=rows)
                if not runs:
                    break
                self._remove_runs(tick, runs, cutoff)
                if len(runs) < rows:
                    break
            self._drain(
                tick,
                "refusals_removed",
                partial(data.remove_expired_refusals, agents=agents, cutoff=cutoff, limit=rows),
            )
            self._drain(
                tick,
                "unreachable_reports_removed",
                partial(
                    data.remove_expired_unreachable_reports,
                    agents=agents,
                    cutoff=cutoff,
                    limit=rows,
                ),
            )

        self._each_group(tick, "agents", after, remove, then="organisations")

    def _remove_runs(self, tick: _Tick, runs: Sequence[UUID], cutoff: datetime) -> None:
        # Events first, in batches of their own: a run has several, and a batch of runs must
        # not take an unbounded number of rows with it.
        self._drain(
            tick,
            "events_removed",
            partial(data.remove_events_of, runs=runs, limit=self._batches.rows),
        )
        self._once(tick, "runs_removed", partial(data.remove_runs, runs=runs, cutoff=cutoff))

    def _organisations(self, tick: _Tick, cutoff: datetime, after: UUID | None) -> None:
        rows = self._batches.rows

        def remove(orgs: Sequence[UUID]) -> None:
            self._drain(
                tick,
                "notifications_removed",
                partial(data.remove_expired_notifications, orgs=orgs, cutoff=cutoff, limit=rows),
            )
            self._drain(
                tick,
                "reviews_removed",
                partial(data.remove_expired_reviews, orgs=orgs, cutoff=cutoff, limit=rows),
            )

        self._each_group(tick, "organisations", after, remove, then="rounds")

    def _each_group(
        self,
        tick: _Tick,
        phase: Literal["agents", "organisations"],
        after: UUID | None,
        remove: Callable[[Sequence[UUID]], None],
        *,
        then: data.Phase,
    ) -> None:
        """`remove` each group of the phase's owners after `after`, saving the position after
        each group; at the end, the start of phase `then`."""
        while True:
            owners = data.next_owners(
                tick.conn, phase=phase, after=after, limit=self._batches.owners_per_step
            )
            if not owners:
                self._save(tick, then, None)
                return
            remove(owners)
            after = owners[-1]
            self._save(tick, phase, after)

    def _rounds(self, tick: _Tick, cutoff: datetime) -> None:
        self._drain(
            tick,
            "rounds_removed",
            partial(data.remove_expired_rounds, cutoff=cutoff, limit=self._batches.rows),
        )

    def _sign_in_failures(self, tick: _Tick, started_at: datetime) -> None:
        self._drain(
            tick,
            "sign_in_failures_removed",
            partial(
                data.remove_forgotten_sign_in_failures,
                before=started_at - FAILURES_FORGOTTEN_AFTER,
                limit=self._batches.rows,
            ),
        )

    def _once(self, tick: _Tick, column: str, remove: Callable[[Connection], int]) -> int:
        return tick.run(lambda conn: {column: remove(conn)})[column]

    def _drain(self, tick: _Tick, column: str, remove: Callable[[Connection], int]) -> None:
        """Repeat `remove` (one bounded removal) until it removes less than a whole batch."""
        while self._once(tick, column, remove) >= self._batches.rows:
            pass

    def _save(self, tick: _Tick, phase: data.Phase, after: UUID | None) -> None:
        def save(conn: Connection) -> dict[str, int]:
            data.save_walk(conn, phase=phase, after=after)
            return {}

        tick.run(save)
