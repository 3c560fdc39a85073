"""The panel's agents: the list, the agent page and the schedule, scoped to the caller's
organisation; and the schedule its new agents take."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from control_plane.accounts.services import actor_of
from control_plane.agents.default_schedule import DefaultSchedule
from control_plane.agents.services import AgentList, AgentPage
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import PanelCaller, RequestNow, services_of
from ground.contract import API_PREFIX
from ground.limits import MAX_TIMES, TIME_PATTERN

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX, tags=["panel"])


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
            # The planner refuses a time given twice.
            "uniqueItems": True,
        },
    )


@router.get("/agents", response_model=AgentList, responses=errors(*AUTHENTICATED))
def list_agents(request: Request, caller: PanelCaller) -> AgentList:
    """The organisation's agents with their schedules."""
    assert caller.org_id is not None
    return services_of(request).agents.list_agents(caller.org_id)


@router.get(
    "/agents/{agent_id}", response_model=AgentPage, responses=errors(*AUTHENTICATED, 404, 422)
)
def agent_page(agent_id: UUID, request: Request, caller: PanelCaller, now: RequestNow) -> AgentPage:
    """The agent page: version, last seen, schedule, next slot (local and instant), latest runs."""
    assert caller.org_id is not None
    return services_of(request).agents.agent_page(caller.org_id, agent_id, now=now)


@router.put(
    "/agents/{agent_id}/schedule",
    response_model=AgentPage,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def set_schedule(
    agent_id: UUID, body: ScheduleBody, request: Request, caller: PanelCaller, now: RequestNow
) -> AgentPage:
    """Replace the agent's schedule. A bad time gets a 422 naming the index and the value."""
    assert caller.org_id is not None
    return services_of(request).agents.set_schedule(
        caller.org_id,
        agent_id,
        enabled=body.enabled,
        times=body.times,
        now=now,
        actor=actor_of(caller),
    )


@router.get("/default-schedule", response_model=DefaultSchedule, responses=errors(*AUTHENTICATED))
def default_schedule(request: Request, caller: PanelCaller) -> DefaultSchedule:
    """The schedule the organisation's new agents take at enrolment; `schedule` null: none
    chosen, they take the platform's (on, at 03:00 in its time zone)."""
    assert caller.org_id is not None
    return services_of(request).agents.default_schedule(caller.org_id)


@router.put(
    "/default-schedule", response_model=DefaultSchedule, responses=errors(*AUTHENTICATED, 422)
)
def set_default_schedule(
    body: ScheduleBody, request: Request, caller: PanelCaller, now: RequestNow
) -> DefaultSchedule:
    """Set the schedule new agents take. Agents already enrolled keep theirs."""
    assert caller.org_id is not None
    return services_of(request).agents.set_default_schedule(
        caller.org_id, enabled=body.enabled, times=body.times, now=now, actor=actor_of(caller)
    )
