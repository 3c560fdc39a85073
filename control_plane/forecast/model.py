"""The capacity forecast: which slots of a local day will not fit inside the caps.

Inside one slot's window there are W rounds that can grant a new token: the window's minutes
less those inside its grant margin (`PlatformSettings.grant_rounds`: 14 of 15 with the default
minute). Each round grants at most `org_cap` per organisation and `global_cap` in total, so if
every scheduled agent needs the update, at most

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
from datetime import date, datetime, timedelta
from typing import Any, Literal, TypeVar
from uuid import UUID
from zoneinfo import ZoneInfo

from control_plane.settings.services import PlatformSettings
from ground.contract import Instant, RefusalCode
from shared_planner import parse_times, slots_on_day

__all__ = [
    "OrgDayForecast",
    "OrgShare",
    "OrgSlotView",
    "PlatformDayForecast",
    "PlatformSlotView",
    "ReleaseNight",
    "SlotForecast",
    "StageName",
    "StageNight",
    "WaveNight",
    "WaveOutlook",
    "day_demand",
    "fair_shares",
    "forecast_slot",
    "org_day_forecast",
    "platform_day_forecast",
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
    # Equals in the organisations' own order (their ids), not in the order they came in: the
    # last units go to the first of them, and the same fleet gets the same shares.
    open_orgs = sorted(
        (org for org in capped if capped[org] > 0), key=lambda org: (capped[org], str(org))
    )
    while open_orgs and remaining > 0:
        level = remaining // len(open_orgs)
        smallest = capped[open_orgs[0]] - served[open_orgs[0]]
        if level == 0:
            # Fewer units left than organisations: one each, in that order.
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


@dataclass(kw_only=True)
class _SlotDemand:
    key: str
    at: datetime
    per_org: dict[Any, int] = field(default_factory=lambda: defaultdict(int))


def day_demand(
    counts: Mapping[tuple[str, ...], Mapping[Any, int]], *, day: date, zone: ZoneInfo
) -> list[_SlotDemand]:
    """The slot instants of local `day` and the agents per organisation scheduled at each."""
    by_instant: dict[datetime, _SlotDemand] = {}
    for times, per_org in counts.items():
        for slot in slots_on_day(parse_times(times), day, tz=zone):
            demand = by_instant.setdefault(slot.at, _SlotDemand(key=slot.key, at=slot.at))
            for org, n in per_org.items():
                demand.per_org[org] += n
    return [by_instant[at] for at in sorted(by_instant)]


@dataclass(frozen=True, kw_only=True)
class _SlotPlace:
    key: str
    at: Instant
    local_time: str
    overlaps: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class PlatformSlotView(_SlotPlace):
    agents: int
    organisations: int
    capacity: int
    org_capacity: int
    can_update: int
    will_miss: int
    orgs_over_their_cap: int


@dataclass(frozen=True, kw_only=True)
class OrgSlotView(_SlotPlace):
    agents: int
    org_capacity: int
    can_update: int
    will_miss: int
    limited_by: RefusalCode | None  # which cap keeps the rest out: org_cap or global_cap


@dataclass(frozen=True, kw_only=True)
class _DayHeader:
    date: date
    timezone: str
    catch_up_minutes: int
    org_cap: int
    global_cap: int


StageName = Literal["canary", "everyone"]


@dataclass(frozen=True, kw_only=True)
class StageNight:
    """At one stage: the agents that would take the release that night, how many of them the
    caps serve inside their slot's window, and how many miss it."""

    agents: int
    can_update: int
    will_miss: int


@dataclass(frozen=True, kw_only=True)
class WaveNight(StageNight):
    """The night as it would be with the release in this wave (the agents of this wave and of
    every earlier one)."""

    position: int
    share_percent: int
    canaries: bool


@dataclass(frozen=True, kw_only=True)
class ReleaseNight:
    release_id: UUID
    channel: str
    platform: str
    version: str
    stage: StageName
    # Claims of a halted release are refused: nobody gets it that night, whatever the stage.
    halted: bool
    # At its current wave (None once the release is at `everyone`: its canary stage is over).
    canary: StageNight | None
    everyone: StageNight
    # The wave it is in, and the night at that wave and at each later one.
    wave: int = 1
    waves: tuple[WaveNight, ...] = ()


@dataclass(frozen=True, kw_only=True)
class WaveOutlook:
    """What publishing a release does in the next day: the wave it starts in, how many agents
    that wave reaches, how many of them the caps serve inside their slot's window, and the first
    slot at which they ask."""

    stage: StageName
    wave: int
    waves: int
    share_percent: int
    canaries: bool
    agents: int
    can_update: int
    will_miss: int
    # The earliest slot of those agents within the day after publishing (None: no agent), and
    # the same in the platform's zone (ISO 8601 with its offset).
    first_slot_at: Instant | None
    first_slot_local_time: str | None
    # The day looked at: from publishing, 24 hours.
    until: Instant


@dataclass(frozen=True, kw_only=True)
class PlatformDayForecast(_DayHeader):
    slots: tuple[PlatformSlotView, ...]
    # Per pair's current release: how many agents get it that night at each stage, within the
    # caps (`control_plane.forecast.releases`); empty when the forecast was asked without `now`.
    releases: tuple[ReleaseNight, ...] = ()


@dataclass(frozen=True, kw_only=True)
class OrgDayForecast(_DayHeader):
    slots: tuple[OrgSlotView, ...]


def _places(demands: list[_SlotDemand], zone: ZoneInfo, window: int) -> list[_SlotPlace]:
    return [
        _SlotPlace(
            key=demand.key,
            at=demand.at,
            local_time=demand.at.astimezone(zone).isoformat(),
            overlaps=tuple(
                other.key
                for other in demands
                if other is not demand and abs(other.at - demand.at) < timedelta(minutes=window)
            ),
        )
        for demand in demands
    ]


def _header(day: date, settings: PlatformSettings) -> dict[str, Any]:
    return {
        "date": day,
        "timezone": settings.timezone,
        "catch_up_minutes": settings.catch_up_minutes,
        "org_cap": settings.org_cap,
        "global_cap": settings.global_cap,
    }


def platform_day_forecast(
    counts: Mapping[tuple[str, ...], Mapping[Any, int]], *, day: date, settings: PlatformSettings
) -> PlatformDayForecast:
    """The forecast of every slot instant of local `day`, for the operators."""
    window = settings.catch_up_minutes
    demands = day_demand(counts, day=day, zone=settings.zone)
    slots = []
    for demand, place in zip(demands, _places(demands, settings.zone, window), strict=True):
        slot = forecast_slot(
            demand.per_org,
            window_minutes=settings.grant_rounds,
            org_cap=settings.org_cap,
            global_cap=settings.global_cap,
        )
        slots.append(
            PlatformSlotView(
                **vars(place),
                agents=slot.agents,
                organisations=slot.organisations,
                capacity=slot.capacity,
                org_capacity=slot.org_capacity,
                can_update=slot.can_update,
                will_miss=slot.will_miss,
                orgs_over_their_cap=slot.orgs_over_their_cap,
            )
        )
    return PlatformDayForecast(**_header(day, settings), slots=tuple(slots))


def org_day_forecast(
    counts: Mapping[tuple[str, ...], Mapping[Any, int]],
    *,
    day: date,
    settings: PlatformSettings,
    org_id: Any,
) -> OrgDayForecast:
    """One organisation's own view of local `day`: its agents, its cap, its estimated share,
    without other organisations' figures."""
    window = settings.catch_up_minutes
    org_capacity = settings.org_cap * settings.grant_rounds
    demands = day_demand(counts, day=day, zone=settings.zone)
    # Only this organisation's slots are placed (and named in `overlaps`): another
    # organisation's schedule is not this one's to see. Its agents weigh only in the estimated
    # share below, as the platform's total per slot.
    own = [demand for demand in demands if demand.per_org.get(org_id, 0) > 0]
    slots = []
    for demand, place in zip(own, _places(own, settings.zone, window), strict=True):
        mine = demand.per_org[org_id]
        share = fair_shares(
            demand.per_org,
            window_minutes=settings.grant_rounds,
            org_cap=settings.org_cap,
            global_cap=settings.global_cap,
        )[org_id]
        slots.append(
            OrgSlotView(
                **vars(place),
                agents=mine,
                org_capacity=org_capacity,
                can_update=share.can_update,
                will_miss=share.will_miss,
                limited_by=_limit(mine, share.can_update, org_capacity),
            )
        )
    return OrgDayForecast(**_header(day, settings), slots=tuple(slots))


def _limit(agents: int, can_update: int, org_capacity: int) -> RefusalCode | None:
    if can_update >= agents:
        return None
    return RefusalCode.ORG_CAP if can_update >= org_capacity else RefusalCode.GLOBAL_CAP
