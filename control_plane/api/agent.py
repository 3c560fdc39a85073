"""The agents' endpoints, scoped to the calling agent."""

from __future__ import annotations

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse

from control_plane.api.deps import AgentCaller, RequestNow, services_of

__all__ = ["router"]

router = APIRouter(prefix="/v1/agent", tags=["agent"])


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in candidates or etag in candidates


@router.get("/config", response_model=None)
def agent_config(
    request: Request,
    caller: AgentCaller,
    now: RequestNow,
    if_none_match: str | None = Header(default=None),
) -> Response:
    """The agent's schedule, time zone, catch-up window, brake, release and the server's time.
    `If-None-Match` with the last ETag gets a 304 when nothing but the time changed."""
    assert caller.agent_id is not None
    config = services_of(request).agent_config.config(caller.agent_id, now)
    headers = {"ETag": config.etag, "Cache-Control": "no-cache"}
    if _etag_matches(if_none_match, config.etag):
        return Response(status_code=304, headers=headers)
    return JSONResponse(config.body, headers=headers)
