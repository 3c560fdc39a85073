"""`GET /v1/agent/config`: what an agent plans with, with an ETag so an unchanged config is a
304 (docs/architecture.md, the HTTP contract)."""

from __future__ import annotations

from fastapi import APIRouter, Header, Request, Response
from fastapi.responses import JSONResponse

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import AgentCaller, RequestNow, services_of
from ground.contract import CONFIG_PATH, AgentConfig

__all__ = ["router"]

router = APIRouter(tags=["agent"])


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {tag.strip().removeprefix("W/") for tag in if_none_match.split(",")}
    return "*" in candidates or etag in candidates


@router.get(
    CONFIG_PATH,
    response_model=AgentConfig,
    responses={
        304: {"description": "unchanged since the ETag in `If-None-Match` (no body)"},
        **errors(*AUTHENTICATED, 404, 422),
    },
)
def agent_config(
    request: Request,
    caller: AgentCaller,
    now: RequestNow,
    if_none_match: str | None = Header(default=None),
) -> Response:
    """The agent's schedule, time zone, catch-up window, brake, release and the server's time.
    `If-None-Match` with the last ETag gets a 304 when nothing but the time changed."""
    assert caller.agent_id is not None
    versioned = services_of(request).agent_config.config(caller.agent_id, now)
    headers = {"ETag": versioned.etag, "Cache-Control": "no-cache"}
    if _etag_matches(if_none_match, versioned.etag):
        return Response(status_code=304, headers=headers)
    return JSONResponse(versioned.config.model_dump(mode="json"), headers=headers)
