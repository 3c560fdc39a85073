"""When the platform's brake was on, read back from the operators' trail.

An agent reads the brake in the config it polls and, while it holds, does not ask for its slot: no
refusal is recorded for it. So the missed pass asks these spans whether the brake was on during a
window, rather than blaming a miss nobody can explain. Each engage and release of the platform's
brake is a `brake.engaged` / `brake.released` event (one release's brake carries a `scope` and is
not this brake); the brake's own row says whether it is on now, and since when, in case the event
that engaged it has been removed by the retention walk.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from control_plane.types import Connection

__all__ = ["BrakeSpans", "read_brake_spans"]

# Few rows (an operator engages the brake in an incident), found by the events' index by kind.
_CHANGES = """
SELECT at, kind = 'brake.engaged' AS engaged
  FROM events
 WHERE kind IN ('brake.engaged', 'brake.released') AND NOT (data ? 'scope') AND at <= %(until)s
 ORDER BY at, id
"""


@dataclass(frozen=True)
class BrakeSpans:
    """The spans the platform's brake was on; `None` as an end: still on at the time read."""

    spans: tuple[tuple[datetime, datetime | None], ...]

    def engaged_during(self, start: datetime, end: datetime) -> bool:
        """Whether the brake was on at any moment of [start, end)."""
        return any(began < end and (ended is None or ended > start) for began, ended in self.spans)


def read_brake_spans(conn: Connection, *, until: datetime) -> BrakeSpans:
    """The platform brake's spans up to `until`."""
    spans: list[tuple[datetime, datetime | None]] = []
    opened: datetime | None = None
    for change in conn.execute(_CHANGES, {"until": until}):
        if change["engaged"]:
            opened = opened or change["at"]
        elif opened is not None:
            spans.append((opened, change["at"]))
            opened = None
    now = conn.execute("SELECT engaged, changed_at FROM platform_brake").fetchone()
    if opened is None and now is not None and now["engaged"] and now["changed_at"] is not None:
        opened = now["changed_at"]
    if opened is not None:
        spans.append((opened, None))
    return BrakeSpans(tuple(spans))
