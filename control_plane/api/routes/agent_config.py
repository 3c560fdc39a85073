"""`GET /v1/agent/config`: what an agent plans with, with an ETag so an unchanged config is a
304 (docs/architecture.md, the HTTP contract)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Header, Query, Request, Response

from control_plane.agent_config.services import (
    VersionedConfig,
)
from control_plane.api.answers import AUTHENTICATED, InertJSON, errors
from control_plane.api.deps import (
    AgentCredential,
    PresentedAgentKey,
    RequestNow,
    in_database_thread,
    services_of,
)
from control_plane.poll_word import PollWord
from control_plane.registry import Services
from ground.contract import (
    CHANNEL_PARAM,
    CONFIG_PATH,
    HOST_TIME_HEADER,
    PLATFORM_PARAM,
    TRUST_ROOT_VERSION_HEADER,
    AgentConfig,
    ReleaseTrack,
)
from ground.limits import DEFAULT_CHANNEL, DEFAULT_PLATFORM, RELEASE_NAME_PATTERN

__all__ = ["etag_matches", "router"]

router = APIRouter(tags=["agent"])


def etag_matches(if_none_match: str | None, etag: str) -> bool:
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
async def agent_config(
    request: Request,
    credential: AgentCredential,
    now: RequestNow,
    if_none_match: str | None = Header(default=None),
    channel: str = Query(
        default=DEFAULT_CHANNEL,
        alias=CHANNEL_PARAM,
        pattern=RELEASE_NAME_PATTERN,
        description="the channel the agent follows",
    ),
    platform: str = Query(
        default=DEFAULT_PLATFORM,
        alias=PLATFORM_PARAM,
        pattern=RELEASE_NAME_PATTERN,
        description="the platform the agent runs on",
    ),
) -> Response:
    """The agent's schedule, time zone, catch-up window, brake, the current release of the
    (channel, platform) it follows and the server's time. `If-None-Match` with the last ETag gets
    a 304 when nothing but the time changed (each pair has its own ETag)."""
    services = services_of(request)
    track = ReleaseTrack(channel=channel, platform=platform)
    # Read from the request like the host id: optional reports every agent poll may carry.
    word = PollWord.read(
        host_id=credential.host_id,
        trust_root=request.headers.get(TRUST_ROOT_VERSION_HEADER),
        dates=request.headers.getlist(HOST_TIME_HEADER),
        now=now,
    )
    # From memory when the change feed keeps it exact: no thread hop, no database.
    versioned = services.agent_config.remembered(credential.secret_sha256, track, now, word)
    if versioned is None:
        versioned = await in_database_thread(
            request, lambda: _config(services, credential, track, now, word)
        )
    headers = {"ETag": versioned.etag, "Cache-Control": "no-cache"}
    if etag_matches(if_none_match, versioned.etag):
        return Response(status_code=304, headers=headers)
    return InertJSON(versioned.at(now).model_dump(mode="json"), headers=headers)


def _config(
    services: Services,
    credential: PresentedAgentKey,
    track: ReleaseTrack,
    now: datetime,
    word: PollWord,
) -> VersionedConfig:
    found = services.agent_config.config_as(credential.secret_sha256, track, now, word)
    if found is not None:
        return found
    caller = credential.principal(services)  # the 401 or 403, when that is why nothing was found
    assert caller.agent_id is not None
    return services.agent_config.config(caller.agent_id, track, now, word)
