"""The panel's endpoints, scoped to the caller's organisation."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from control_plane.api.deps import PanelCaller, services_of
from shared_planner import MAX_TIMES, TIME_PATTERN

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["panel"])


class ScheduleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: StrictBool = Field(description="whether scheduled updates run at all")
    # Typed loosely on purpose: the planner's own rules judge each entry, so a customer reads
    # "times[1]: '03:07' is not on the five-minute grid" rather than a type checker's words.
    times: Any = Field(
        description="wall-clock times HH:MM on the five-minute grid, in the platform's time zone",
        examples=[["03:00", "13:30"]],
        json_schema_extra={
            "type": "array",
            "items": {"type": "string", "pattern": TIME_PATTERN},
            "maxItems": MAX_TIMES,
        },
    )


@router.get("/agents")
def list_agents(request: Request, caller: PanelCaller) -> dict[str, Any]:
    """The organisation's agents with their schedules."""
    assert caller.org_id is not None
    return {"agents": services_of(request).agents.list_agents(caller.org_id)}


@router.get("/agents/{agent_id}")
def agent_page(agent_id: UUID, request: Request, caller: PanelCaller) -> dict[str, Any]:
    """The agent page: version, last seen, schedule, next slot (local and instant), latest runs."""
    assert caller.org_id is not None
    return services_of(request).agents.agent_page(caller.org_id, agent_id)


@router.put("/agents/{agent_id}/schedule")
def set_schedule(
    agent_id: UUID, body: ScheduleBody, request: Request, caller: PanelCaller
) -> dict[str, Any]:
    """Replace the agent's schedule. A bad time gets a 422 naming the index and the value."""
    assert caller.org_id is not None
    page: dict[str, Any] = services_of(request).agents.set_schedule(
        caller.org_id, agent_id, enabled=body.enabled, times=body.times
    )
    return page


@router.get("/agents/{agent_id}/runs")
def agent_runs(agent_id: UUID, request: Request, caller: PanelCaller) -> dict[str, Any]:
    """The agent's update runs, newest first: scheduled ones and those a person started."""
    assert caller.org_id is not None
    return {"runs": services_of(request).runs.agent_runs(caller.org_id, agent_id)}


@router.get("/agents/{agent_id}/events")
def agent_events(agent_id: UUID, request: Request, caller: PanelCaller) -> dict[str, Any]:
    """The agent's timeline. A scheduled update's events name the schedule as the actor."""
    assert caller.org_id is not None
    return {"events": services_of(request).runs.agent_events(caller.org_id, agent_id)}


@router.post("/agents/{agent_id}/update", response_model=None)
def request_update(agent_id: UUID, request: Request, caller: PanelCaller) -> Response:
    """Update this agent now (a manual update: no slot, no caps). 202 new, 200 already pending."""
    assert caller.org_id is not None
    created, run = services_of(request).runs.request_manual_update(
        caller.org_id, agent_id, caller.credential_id
    )
    return JSONResponse(jsonable_encoder(run), status_code=202 if created else 200)


@router.get("/operations")
def operations(request: Request, caller: PanelCaller) -> dict[str, Any]:
    """The task tray: operations people in this organisation started. No scheduled updates."""
    assert caller.org_id is not None
    return {"operations": services_of(request).runs.operations(caller.org_id)}
