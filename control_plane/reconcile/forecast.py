"""The capacity forecast: which slots of a local day will not fit inside the caps (DESIGN.md
"Scale").

Inside one slot's window of W minutes there are W rounds. Each round grants at most `org_cap` per
organisation and `global_cap` in total, so if every scheduled agent needs the update, at most

    min(global_cap * W,  Σ over organisations of min(agents_o, org_cap * W))

agents can be served (the max-flow of agents → their organisation → rounds; it is reached when
agents keep asking every round, which they do). Everyone else misses the window. The herd
benchmark calls `forecast_slot` to print this number beside the misses it observes.

Slots whose windows overlap (03:00 and 03:05 with a 15-minute window) share rounds; each is
forecast alone and named in the other's `overlaps`, so the figures are then optimistic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

from control_plane.services.settings import PlatformSettings
from control_plane.types import Connection
from ground.contract import format_instant
from shared_planner import parse_times, slots_between

__all__ = [
    "OrgShare",
    "SlotForecast",
    "day_forecast",
    "fair_shares",
    "forecast_slot",
    "read_scheduled_agents",
]

K = TypeVar("K")


@dataclass(frozen=True, kw_only=True)
class SlotForecast:
    agents: int
    organisations: int
    window_minutes: int
    capacity: int  # global_cap * window
    org_capacity: int  # org_cap * window, for each organisation
    can_update: int
    will_miss: int
    orgs_over_their_cap: int


def forecast_slot(
    agents_per_org: Mapping[Any, int], *, org_cap: int, global_cap: int, window_minutes: int
) -> SlotForecast:
    """How many of these agents, all asking for an update at one slot, get one in the window."""
    for org, count in agents_per_org.items():
        if count < 0:
            raise ValueError(f"agents_per_org[{org!r}]: {count} is negative (expected >= 0)")
    capacity = global_cap * window_minutes
    org_capacity = org_cap * window_minutes
    total = sum(agents_per_org.values())
    can_update = min(capacity, sum(min(n, org_capacity) for n in agents_per_org.values()))
    return SlotForecast(
        agents=total,
        organisations=sum(1 for n in agents_per_org.values() if n > 0),
        window_minutes=window_minutes,
        capacity=capacity,
        org_capacity=org_capacity,
        can_update=can_update,
        will_miss=total - can_update,
        orgs_over_their_cap=sum(1 for n in agents_per_org.values() if n > org_capacity),
    )


@dataclass(frozen=True, kw_only=True)
class OrgShare:
    agents: int
    can_update: int
    will_miss: int


def fair_shares(
    agents_per_org: Mapping[K, int], *, org_cap: int, global_cap: int, window_minutes: int
) -> dict[K, OrgShare]:
    """Each organisation's part of `forecast_slot`'s total, shared max-min fairly (water-filling):
    an estimate for one organisation's view, whose total is the exact platform figure."""
    capped = {org: min(n, org_cap * window_minutes) for org, n in agents_per_org.items()}
    remaining = global_cap * window_minutes
    served = dict.fromkeys(capped, 0)
    open_orgs = sorted((org for org in capped if capped[org] > 0), key=lambda org: capped[org])
    while open_orgs and remaining > 0:
        level = remaining // len(open_orgs)
        smallest = capped[open_orgs[0]] - served[open_orgs[0]]
        if level == 0:
            # Fewer units left than organisations: one each, in a stable order.
            for org in open_orgs[:remaining]:
                served[org] += 1
            break
        step = min(level, smallest)
        for org in open_orgs:
            served[org] += step
        remaining -= step * len(open_orgs)
        open_orgs = [org for org in open_orgs if served[org] < capped[org]]
    return {
        org: OrgShare(agents=n, can_update=served[org], will_miss=n - served[org])
        for org, n in agents_per_org.items()
    }


def read_scheduled_agents(conn: Connection) -> dict[tuple[str, ...], dict[Any, int]]:
    """Enabled agents counted per schedule and organisation (most share the default 03:00)."""
    rows = conn.execute(
        "SELECT update_schedule_times AS times, org_id, count(*) AS agents FROM agents"
        " WHERE update_schedule_enabled AND jsonb_array_length(update_schedule_times) > 0"
        " GROUP BY update_schedule_times, org_id"
    ).fetchall()
    counts: dict[tuple[str, ...], dict[Any, int]] = defaultdict(dict)
    for row in rows:
        counts[tuple(row["times"])][row["org_id"]] = row["agents"]
    return counts


@dataclass(kw_only=True)
class _SlotDemand:
    key: str
    at: datetime
    per_org: dict[Any, int] = field(default_factory=lambda: defaultdict(int))


def day_demand(
    counts: Mapping[tuple[str, ...], Mapping[Any, int]], *, day: date, zone: ZoneInfo
) -> list[_SlotDemand]:
    """The slot instants of local `day` and the agents per organisation scheduled at each."""
    start = datetime.combine(day - timedelta(days=1), time(), tzinfo=UTC)
    end = start + timedelta(days=3)
    by_instant: dict[datetime, _SlotDemand] = {}
    for times, per_org in counts.items():
        for slot in slots_between(parse_times(times), start=start, end=end, tz=zone):
            if slot.day != day:
                continue
            demand = by_instant.setdefault(slot.at, _SlotDemand(key=slot.key, at=slot.at))
            for org, n in per_org.items():
                demand.per_org[org] += n
    return [by_instant[at] for at in sorted(by_instant)]


def day_forecast(
    counts: Mapping[tuple[str, ...], Mapping[Any, int]],
    *,
    day: date,
    settings: PlatformSettings,
    org_id: Any = None,
) -> dict[str, Any]:
    """The forecast of every slot instant of local `day`; with `org_id`, that organisation's
    own view (its agents, its cap, its estimated share), without other organisations' figures."""
    zone = settings.zone
    window = settings.catch_up_minutes
    caps = {"org_cap": settings.org_cap, "global_cap": settings.global_cap}
    demands = day_demand(counts, day=day, zone=zone)
    slots = []
    for demand in demands:
        overlaps = [
            other.key
            for other in demands
            if other is not demand and abs(other.at - demand.at) < timedelta(minutes=window)
        ]
        view: dict[str, Any] = {
            "key": demand.key,
            "at": format_instant(demand.at),
            "local_time": demand.at.astimezone(zone).isoformat(),
            "overlaps": overlaps,
        }
        if org_id is None:
            slot = forecast_slot(demand.per_org, window_minutes=window, **caps)
            view.update(
                agents=slot.agents,
                organisations=slot.organisations,
                capacity=slot.capacity,
                org_capacity=slot.org_capacity,
                can_update=slot.can_update,
                will_miss=slot.will_miss,
                orgs_over_their_cap=slot.orgs_over_their_cap,
            )
        else:
            mine = demand.per_org.get(org_id, 0)
            if mine == 0:
                continue
            share = fair_shares(demand.per_org, window_minutes=window, **caps)[org_id]
            view.update(
                agents=mine,
                org_capacity=settings.org_cap * window,
                can_update=share.can_update,
                will_miss=share.will_miss,
                limited_by=_limit(mine, share.can_update, settings.org_cap * window),
            )
        slots.append(view)
    return {
        "date": day.isoformat(),
        "timezone": settings.timezone,
        "catch_up_minutes": window,
        **caps,
        "slots": slots,
    }


def _limit(agents: int, can_update: int, org_capacity: int) -> str | None:
    if can_update >= agents:
        return None
    return "org_cap" if can_update >= org_capacity else "global_cap"
