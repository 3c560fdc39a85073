"""The agent's timeline in the panel."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

from fastapi import APIRouter, Query, Request

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, PanelCaller, services_of
from control_plane.events.services import (
    KIND_PATTERN,
    MAX_EVENT_ID,
    MAX_EVENTS_PAGE,
    EventFilter,
    Timeline,
    TrailPage,
    trail_instant,
)
from ground.contract import API_PREFIX
from ground.instants import RFC_3339_PATTERN

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


def _instant_query(description: str) -> Any:
    # `parse_instant` enforces RFC_3339_PATTERN with its own 422; the schema states the same.
    return Query(
        description=description,
        json_schema_extra={"format": "date-time", "pattern": RFC_3339_PATTERN},
    )


@router.get("/admin/events", response_model=TrailPage, responses=errors(*AUTHENTICATED, 422))
def trail(
    request: Request,
    caller: OperatorCaller,
    org_id: Annotated[UUID | None, Query()] = None,
    agent_id: Annotated[UUID | None, Query()] = None,
    kind: Annotated[
        str | None,
        Query(
            max_length=100,
            pattern=KIND_PATTERN,
            description='a kind, or a family ending in "." (not blank: leave it out for all)',
        ),
    ] = None,
    actor_kind: Annotated[
        Literal["schedule", "user", "agent", "operator", "control_plane"] | None, Query()
    ] = None,
    actor_id: Annotated[UUID | None, Query()] = None,
    since: Annotated[str | None, _instant_query("RFC 3339 instant, inclusive")] = None,
    until: Annotated[str | None, _instant_query("RFC 3339 instant, exclusive")] = None,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_EVENT_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_EVENTS_PAGE)] = 100,
) -> TrailPage:
    """The trail, newest first: every operator action (brake, settings, releases, credentials,
    deleted agents), every schedule change and every update step, with its actor. Deleted
    agents' events included."""
    del caller
    return services_of(request).events.trail(
        EventFilter(
            org_id=org_id,
            agent_id=agent_id,
            kind=kind,
            actor_kind=actor_kind,
            actor_id=actor_id,
            since=trail_instant("since", since),
            until=trail_instant("until", until),
            before_id=before_id,
            limit=limit,
        )
    )
