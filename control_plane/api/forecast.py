"""The capacity forecast: the operators' view of every slot, an organisation's view of its own."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from control_plane.api.deps import OperatorCaller, PanelCaller, services_of
from control_plane.reconcile.forecast_service import parse_day

__all__ = ["router"]

router = APIRouter(tags=["forecast"])

_DATE = Query(description="a local calendar date in the platform's zone, YYYY-MM-DD")


@router.get("/v1/admin/forecast")
def platform_forecast(
    request: Request, caller: OperatorCaller, date: str = _DATE
) -> dict[str, Any]:
    """For each slot instant of the day: enabled agents, organisations, the capacity the caps
    allow inside the window, and how many agents will miss it if all need an update."""
    del caller
    return services_of(request).reconcile.forecast.day(parse_day("date", date))


@router.get("/v1/forecast")
def org_forecast(request: Request, caller: PanelCaller, date: str = _DATE) -> dict[str, Any]:
    """The same for the caller's organisation: its agents per slot and its estimated share."""
    assert caller.org_id is not None
    return services_of(request).reconcile.forecast.day(
        parse_day("date", date), org_id=caller.org_id
    )
