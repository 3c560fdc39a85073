"""How much retention may remove at once: short transactions, a bounded share per tick."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from control_plane.errors import ConfigurationError

__all__ = ["MIN_TRANSACTIONS_PER_TICK", "RetentionBatches"]

# A group of owners ends with up to three transactions that may remove nothing (the last
# notifications and slot reviews, then the saved position): a tick must be able to finish them,
# or the next tick would start the same group again and the walk never move on.
MIN_TRANSACTIONS_PER_TICK = 4


@dataclass(frozen=True, kw_only=True)
class RetentionBatches:
    # Rows of one table one transaction removes at most: a few milliseconds of locks, never a
    # transaction that holds back vacuum or a standby's replay.
    rows: int = 2000
    # Agents (or organisations) looked at together; their expired rows are found by index.
    owners_per_step: int = 500
    # Transactions one reconcile tick spends at most; the walk goes on at the next tick.
    transactions_per_tick: int = 20
    # Real seconds between two transactions, so the claims' writes are never queued behind us.
    pause_seconds: float = 0.02
    # Product time from one completed walk to the start of the next.
    every: timedelta = timedelta(hours=6)

    def __post_init__(self) -> None:
        for name, least in (
            ("rows", 1),
            ("owners_per_step", 1),
            ("transactions_per_tick", MIN_TRANSACTIONS_PER_TICK),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigurationError(
                    f"{name}: {value!r} must be a whole number of at least {least}"
                )
        if not 0 <= self.pause_seconds <= 10:
            raise ConfigurationError(
                f"pause_seconds: {self.pause_seconds!r} is out of range (expected 0 to 10)"
            )
        if not isinstance(self.every, timedelta) or self.every < timedelta(0):
            raise ConfigurationError(f"every: {self.every!r} must be a non-negative timedelta")
