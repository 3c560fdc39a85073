"""Marks that the control plane was up, so a miss during our own outage is never blamed on the
customer's agent.

Every serving process (each replica, each worker process) marks itself alive at each tick of its
reconcile loop, leader or not: one row per replica and stretch, `started_at` to `last_mark_at`.
A mark that comes more than its gap (`liveness_gap`: `LIVENESS_GAP`, or more on a fast fake clock)
after the previous one starts a new stretch, so a
process that was SIGKILLed and restarted, or that could not write because the database was down,
leaves a hole. A window was an outage of ours when the stretches of all replicas together do not
cover it — judged only for windows after the first mark ever, since before it (a database older
than migration 0009) nothing is known.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from control_plane.types import Connection

__all__ = [
    "LIVENESS_GAP",
    "LIVENESS_GAP_REAL_SECONDS",
    "LIVENESS_KEPT",
    "Coverage",
    "liveness_gap",
    "mark_alive",
    "read_coverage",
]

# Marks further apart than this are an outage. The worker ticks every 30 s of the product clock;
# the margin absorbs a slow pass without hiding an outage that matters to a 15-minute window.
LIVENESS_GAP = timedelta(minutes=5)
# On a fast fake clock a slow pass is many product minutes (a real second is a product minute at
# speed 60): the gap is at least this much real time, whatever the speed.
LIVENESS_GAP_REAL_SECONDS = 5.0
# How long stretches are kept (the worker never judges windows older than its catch-up).
LIVENESS_KEPT = timedelta(days=8)


def liveness_gap(speed: float) -> timedelta:
    """The gap between marks that ends a stretch, for a clock running `speed` times real time."""
    return max(LIVENESS_GAP, timedelta(seconds=LIVENESS_GAP_REAL_SECONDS * speed))


def mark_alive(
    conn: Connection,
    *,
    replica: str,
    stretch_started: datetime | None,
    now: datetime,
    gap: timedelta = LIVENESS_GAP,
) -> datetime:
    """Extend this replica's stretch to `now`, or start a new one; returns its start."""
    if stretch_started is not None:
        row = conn.execute(
            "UPDATE platform_liveness SET last_mark_at = %(now)s"
            " WHERE replica = %(replica)s AND started_at = %(started)s"
            " AND last_mark_at >= %(now)s - allowed_gap AND last_mark_at <= %(now)s"
            " RETURNING started_at",
            {"now": now, "replica": replica, "started": stretch_started},
        ).fetchone()
        if row is not None:
            return stretch_started
    conn.execute(
        "INSERT INTO platform_liveness (replica, started_at, last_mark_at, allowed_gap)"
        " VALUES (%s, %s, %s, %s)"
        " ON CONFLICT (replica, started_at) DO UPDATE SET last_mark_at = EXCLUDED.last_mark_at",
        [replica, now, now, gap],
    )
    conn.execute("DELETE FROM platform_liveness WHERE last_mark_at < %s", [now - LIVENESS_KEPT])
    return now


class Coverage:
    """The merged stretches of every replica: which spans of time the control plane was up."""

    def __init__(self, stretches: Iterable[tuple[datetime, datetime, timedelta]]) -> None:
        # Each stretch counts as up until its last mark plus its allowed gap.
        merged: list[list[datetime]] = []
        for start, last_mark, gap in sorted(stretches):
            end = last_mark + gap
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._spans = [(start, end) for start, end in merged]
        self.first_mark = self._spans[0][0] if self._spans else None

    def was_down(self, start: datetime, end: datetime) -> bool:
        """True when, after the first mark ever, some part of [start, end] had no replica up."""
        if self.first_mark is None or start < self.first_mark:
            return False
        return not any(
            span_start <= start and end <= span_end for span_start, span_end in self._spans
        )


def read_coverage(conn: Connection, *, since: datetime, until: datetime) -> Coverage:
    """The stretches that can bear on windows in [since, until], and the first mark ever."""
    rows = conn.execute(
        "SELECT started_at, last_mark_at, allowed_gap FROM platform_liveness"
        " WHERE last_mark_at + allowed_gap >= %s AND started_at <= %s"
        " UNION ALL (SELECT started_at, started_at, allowed_gap FROM platform_liveness"
        "            ORDER BY started_at LIMIT 1)",
        [since, until],
    ).fetchall()
    return Coverage((row["started_at"], row["last_mark_at"], row["allowed_gap"]) for row in rows)
