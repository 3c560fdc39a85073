"""The agent's timeline in the panel."""

from __future__ import annotations

from uuid import UUID

from fastapi import APIRouter, Request

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import PanelCaller, services_of
from control_plane.events.services import Timeline
from ground.contract import API_PREFIX

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX, tags=["panel"])


@router.get(
    "/agents/{agent_id}/events",
    response_model=Timeline,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def agent_events(agent_id: UUID, request: Request, caller: PanelCaller) -> Timeline:
    """The agent's timeline. A scheduled update's events name the schedule as the actor."""
    assert caller.org_id is not None
    return services_of(request).events.agent_events(caller.org_id, agent_id)
