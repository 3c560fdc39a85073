"""The figures behind `GET /metrics`: all their SQL.

Figures stored in the database are the platform's (every replica reports the same); figures kept
in memory (refused claim requests) are this replica's.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from control_plane.claims.refusals import RefusalRecorder
from control_plane.types import Pool

__all__ = ["MetricsService", "MetricsSnapshot"]

Counts = tuple[tuple[tuple[str, ...], int], ...]


@dataclass(frozen=True, kw_only=True)
class MetricsSnapshot:
    """Everything `/metrics` shows, read at `now`. A `Counts` row is (label values, count)."""

    now: datetime
    replica: str
    granted: int
    refused_here: dict[str, int]
    dropped_here: int
    refusal_facts: Counts  # (reason,)
    runs: Counts  # (trigger, status)
    missed: Counts  # (reason,)
    notifications: int
    deliveries: Counts  # (state,)
    attempts: Counts  # (outcome,)
    reconciled_until: datetime | None
    last_pass_at: datetime | None


def _counts(rows: list[dict[str, Any]], *labels: str) -> Counts:
    return tuple((tuple(str(row[label]) for label in labels), int(row["n"])) for row in rows)


class MetricsService:
    def __init__(self, pool: Pool, refusals: RefusalRecorder, replica: str) -> None:
        self._pool = pool
        self._refusals = refusals
        self._replica = replica

    def snapshot(self, now: datetime) -> MetricsSnapshot:
        with self._pool.connection() as conn:
            granted = conn.execute("SELECT count(*) AS n FROM tokens").fetchone()
            runs = conn.execute(
                "SELECT trigger, status, count(*) AS n FROM runs GROUP BY trigger, status"
                " ORDER BY trigger, status"
            ).fetchall()
            missed = conn.execute(
                "SELECT miss_reason, count(*) AS n FROM runs WHERE status = 'missed'"
                " GROUP BY miss_reason ORDER BY miss_reason"
            ).fetchall()
            facts = conn.execute(
                "SELECT reason, count(*) AS n FROM claim_refusals GROUP BY reason ORDER BY reason"
            ).fetchall()
            notifications = conn.execute("SELECT count(*) AS n FROM notifications").fetchone()
            deliveries = conn.execute(
                "SELECT state, count(*) AS n FROM webhook_deliveries GROUP BY state ORDER BY state"
            ).fetchall()
            attempts = conn.execute(
                "SELECT outcome, count(*) AS n FROM webhook_attempts"
                " GROUP BY outcome ORDER BY outcome"
            ).fetchall()
            progress = conn.execute(
                "SELECT reconciled_until, last_pass_at FROM reconcile_progress"
            ).fetchone()
        assert granted is not None and notifications is not None
        assert progress is not None, "migration 0005 inserts the progress row"
        return MetricsSnapshot(
            now=now,
            replica=self._replica,
            granted=granted["n"],
            refused_here=self._refusals.refused_counts(),
            dropped_here=self._refusals.dropped,
            refusal_facts=_counts(facts, "reason"),
            runs=_counts(runs, "trigger", "status"),
            missed=_counts(missed, "miss_reason"),
            notifications=notifications["n"],
            deliveries=_counts(deliveries, "state"),
            attempts=_counts(attempts, "outcome"),
            reconciled_until=progress["reconciled_until"],
            last_pass_at=progress["last_pass_at"],
        )
