"""The capacity forecast: the operators' view of every slot, an organisation's view of its own."""

from __future__ import annotations

from fastapi import APIRouter, Query, Request

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, PanelCaller, RequestNow, services_of
from control_plane.forecast.model import OrgDayForecast, PlatformDayForecast
from control_plane.forecast.services import DAY_PATTERN, parse_day
from ground.contract import API_PREFIX

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX, tags=["forecast"])

# `parse_day` enforces DAY_PATTERN with its own 422 (naming the expected form); the schema states
# the same declaration, so a generated client sends only what the route takes.
_DATE = Query(
    description="a local calendar date in the platform's zone, YYYY-MM-DD",
    json_schema_extra={"format": "date", "pattern": DAY_PATTERN},
)


@router.get(
    "/admin/forecast",
    response_model=PlatformDayForecast,
    responses=errors(*AUTHENTICATED, 422),
)
def platform_forecast(
    request: Request, caller: OperatorCaller, now: RequestNow, date: str = _DATE
) -> PlatformDayForecast:
    """For each slot instant of the day: enabled agents, organisations, the capacity the caps
    allow inside the window, and how many agents will miss it if all need an update. And for
    each pair's current release (`releases`): how many agents get it that night in its current
    wave and in each later one (`waves`), within the caps (offers as they stand now; a halted
    release reaches nobody). `canary` repeats the current wave's figures (null once the release
    is at `everyone`) and `everyone` the last wave's."""
    del caller
    return services_of(request).forecast.platform_day(parse_day("date", date), now=now)


@router.get("/forecast", response_model=OrgDayForecast, responses=errors(*AUTHENTICATED, 422))
def org_forecast(request: Request, caller: PanelCaller, date: str = _DATE) -> OrgDayForecast:
    """The same for the caller's organisation: its agents per slot and its estimated share."""
    assert caller.org_id is not None
    return services_of(request).forecast.org_day(parse_day("date", date), org_id=caller.org_id)
