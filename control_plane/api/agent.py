"""The agents' endpoints, scoped to the calling agent (docs/architecture.md, the HTTP contract)."""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from fastapi import APIRouter, Header, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from control_plane.api.deps import AgentCaller, RequestNow, services_of
from control_plane.api.ranges import Unsatisfiable, requested_range
from control_plane.errors import ClaimRefused, InvalidInput

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


class ClaimBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot_key: str | None = Field(default=None, examples=["2026-11-30T03:00"])
    manual_run_id: UUID | None = None
    from_version: str | None = Field(default=None, max_length=100, examples=["1.4.1"])


@router.post("/claims", response_model=None)
def claim(body: ClaimBody, request: Request, caller: AgentCaller, now: RequestNow) -> Response:
    """The throttle token for a slot (or a manual update): 201 new, 200 the same claim again;
    422 `not_a_slot`, 409 `window_closed`/`slot_consumed`, 503 `brake`, 429 `org_cap`/`global_cap`
    with `retry_after_seconds`."""
    assert caller.agent_id is not None
    claims = services_of(request).claims
    if (body.slot_key is None) == (body.manual_run_id is None):
        raise InvalidInput(
            "slot_key",
            body.slot_key,
            "must be given, or manual_run_id instead (exactly one of the two)",
        )
    if body.manual_run_id is not None:
        result = claims.claim_manual(caller.agent_id, body.manual_run_id, body.from_version, now)
    else:
        assert body.slot_key is not None
        try:
            result = claims.claim_slot(caller.agent_id, body.slot_key, body.from_version, now)
        except ClaimRefused as refused:
            # The fact behind a miss reason, buffered in memory: the refusal path writes nothing.
            refusals = services_of(request).reconcile.refusals
            refusals.record(caller.agent_id, body.slot_key, refused.code or "refused", now)
            raise
    return JSONResponse(result.body, status_code=201 if result.created else 200)


class NothingToDoBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    slot_key: str = Field(examples=["2026-11-30T03:00"])
    status: Literal["up_to_date"]
    version: str | None = Field(default=None, max_length=100)


@router.post("/runs", response_model=None)
def nothing_to_do(
    body: NothingToDoBody, request: Request, caller: AgentCaller, now: RequestNow
) -> Response:
    """Already on the newest release: a run row that consumes the slot (201, or 200 again)."""
    assert caller.agent_id is not None
    created, run = services_of(request).runs.record_up_to_date(
        caller.agent_id, body.slot_key, body.version, now
    )
    return JSONResponse(jsonable_encoder(run), status_code=201 if created else 200)


class OutcomeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: Literal["succeeded", "failed", "rolled_back"]
    version: str | None = Field(default=None, max_length=100)
    error: str | None = Field(default=None, max_length=2000)


@router.patch("/runs/{run_id}")
def report_outcome(
    run_id: UUID, body: OutcomeBody, request: Request, caller: AgentCaller
) -> dict[str, Any]:
    """The outcome of a claimed run; the same outcome again is a 200 with the same run."""
    assert caller.agent_id is not None
    return services_of(request).runs.report_outcome(
        caller.agent_id, run_id, body.status, body.version, body.error
    )


@router.get("/runs/{run_id}/artifact", response_model=None)
def download_artifact(
    run_id: UUID,
    request: Request,
    caller: AgentCaller,
    now: RequestNow,
    range_header: str | None = Header(default=None, alias="Range"),
    if_range: str | None = Header(default=None),
) -> Response:
    """The release build for this run, while its token is valid. `Range` + `If-Range` resume."""
    assert caller.agent_id is not None
    services = services_of(request)
    artifact = services.runs.artifact_for_download(caller.agent_id, run_id, now)
    etag = f'"{artifact.sha256}"'
    headers = {"ETag": etag, "Accept-Ranges": "bytes", "Content-Type": "application/gzip"}
    try:
        chosen = requested_range(range_header, if_range, etag=etag, size=artifact.length)
    except Unsatisfiable:
        headers["Content-Range"] = f"bytes */{artifact.length}"
        return Response(status_code=416, headers=headers)
    if chosen is None:
        start, end, status = 0, artifact.length - 1, 200
    else:
        start, end, status = chosen.start, chosen.end, 206
        headers["Content-Range"] = f"bytes {start}-{end}/{artifact.length}"
    headers["Content-Length"] = str(max(0, end - start + 1))
    body = services.releases.read_artifact(artifact.release_id, start, end)
    return StreamingResponse(body, status_code=status, headers=headers)
