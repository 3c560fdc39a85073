"""Runs: what an agent reports after (or instead of) a claim, the artifact a claimed run
downloads, and the panel's run lists, manual updates and task tray."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Header, Path, Request, Response
from fastapi.responses import StreamingResponse

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, DownloadRefusal, errors
from control_plane.api.deps import (
    AgentCaller,
    OperatorCaller,
    PanelCaller,
    RequestNow,
    services_of,
)
from control_plane.api.no_body import NoBody
from control_plane.errors import Conflict
from control_plane.releases.patches import ServedKind
from control_plane.releases.services import ArtifactInfo
from control_plane.runs.ranges import Unsatisfiable, requested_range
from control_plane.runs.recorded_answer import recorded_run
from control_plane.runs.services import Operations, ReleaseRetry, RunList
from control_plane.runs.views import RunView
from ground.contract import (
    API_PREFIX,
    RUNS_PATH,
    UNREACHABLE_PATH,
    AnswerCode,
    NothingToDoReport,
    OutcomeReport,
    SwapPermit,
    UnreachableAnswer,
    UnreachableReport,
    confirm_path,
)

__all__ = ["router"]

router = APIRouter()


# -- the agent's reports and download -------------------------------------------------------------


def _download_answers(media_type: str, whole: str) -> dict[int | str, dict[str, Any]]:
    """A download's documented answers: the whole file, a range of it, and the refusals."""

    def binary() -> dict[str, Any]:
        return {media_type: {"schema": {"type": "string", "format": "binary"}}}

    return {
        200: {"content": binary(), "description": whole},
        206: {
            "content": binary(),
            "description": "the requested range (`Range`, `If-Range` with the ETag)",
        },
        **errors(*AUTHENTICATED, 404, 416, 422, models={403: DownloadRefusal}),
    }


@router.post(
    RUNS_PATH,
    tags=["agent"],
    response_model=RunView,
    status_code=201,
    responses={
        200: {"model": RunView, "description": "the same report again: the same run"},
        **errors(*AUTHENTICATED, 404, 409, 422),
    },
)
def nothing_to_do(
    body: NothingToDoReport,
    request: Request,
    response: Response,
    caller: AgentCaller,
    now: RequestNow,
) -> RunView:
    """Already on the newest release: a run row that consumes the slot (201, or 200 again)."""
    assert caller.agent_id is not None
    recorded = services_of(request).runs.record_up_to_date(
        caller.agent_id, body.slot_key, body.version, now, updater_version=body.updater_version
    )
    return recorded_run(recorded, response)


@router.post(
    UNREACHABLE_PATH,
    tags=["agent"],
    response_model=UnreachableAnswer,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def report_unreachable(
    body: UnreachableReport, request: Request, caller: AgentCaller, now: RequestNow
) -> UnreachableAnswer:
    """The agent was running inside its slot's window, tried, and could not reach the control
    plane; sent once it reaches it again. 200 with what changed: `corrected` (the slot's
    `offline` miss now reads `unreachable`), `recorded` (kept for the slot's miss, if its window
    closes without a run), `unchanged` (the slot ran, was skipped, missed for another reason, or
    was reported before). 422 naming the field for a slot that is not this agent's, has not
    opened, is older than 7 days, or tries outside its window."""
    assert caller.agent_id is not None
    return services_of(request).runs.record_unreachable(caller.agent_id, body, now)


@router.patch(
    RUNS_PATH + "/{run_id}",
    tags=["agent"],
    response_model=RunView,
    responses=errors(*AUTHENTICATED, 404, 409, 422),
)
def report_outcome(
    run_id: UUID, body: OutcomeReport, request: Request, caller: AgentCaller, now: RequestNow
) -> RunView:
    """The outcome of a claimed run; the same outcome again is a 200 with the same run. A switch
    (`succeeded`, `rolled_back`) at `switched_at` (else now) after the token was revoked or
    expired, or after the window closed, is recorded as `unauthorised` and answered 409
    `outcome_not_authorised`; another outcome than the recorded one is 409 `run_not_claimed`."""
    assert caller.agent_id is not None
    services = services_of(request)
    try:
        return services.runs.report_outcome(
            caller.agent_id,
            run_id,
            body.status,
            body.version,
            body.error,
            now=now,
            reason=body.reason,
            switched_at=body.switched_at,
            updater_version=body.updater_version,
            delivery=body.delivery,
        )
    except Conflict as refused:
        if refused.code == AnswerCode.OUTCOME_NOT_AUTHORISED:
            # A refusal that wrote: the run is recorded as unauthorised before the agent is told
            # no (a manual update it ended is no longer pending). Counted as this replica's
            # write, so the agent's next poll is not answered from a memory that has not read it.
            services.answers.writes.note()
        raise


@router.post(
    confirm_path("{run_id}"),
    tags=["agent"],
    response_model=SwapPermit,
    responses=errors(*AUTHENTICATED, 404, 409, 422, models={403: DownloadRefusal}),
)
def confirm_swap(
    run_id: UUID, request: Request, caller: AgentCaller, now: RequestNow, _body: NoBody
) -> SwapPermit:
    """Asked immediately before the swap: 200 with the token and the window's end while the run
    is this agent's, still claimed, its token neither revoked nor expired and its window open.
    Else 403 `token_revoked` / `token_expired`, 409 `window_closed` / `run_finished`, 404
    `run_not_found`: do not switch."""
    assert caller.agent_id is not None
    return services_of(request).runs.confirm_swap(caller.agent_id, run_id, now)


@router.get(
    RUNS_PATH + "/{run_id}/artifact",
    tags=["agent"],
    response_class=StreamingResponse,
    responses=_download_answers("application/gzip", "the whole build"),
)
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
    return _ranged(
        request,
        artifact,
        "full",
        range_header,
        if_range,
        lambda start, end: services.releases.read_artifact(artifact.release_id, start, end),
    )


@router.get(
    RUNS_PATH + "/{run_id}/patches/{base_tar_sha256}",
    tags=["agent"],
    response_class=StreamingResponse,
    responses=_download_answers("application/zstd", "the whole patch"),
)
def download_patch(
    run_id: UUID,
    base_tar_sha256: Annotated[str, Path(pattern="^[0-9a-f]{64}$")],
    request: Request,
    caller: AgentCaller,
    now: RequestNow,
    range_header: str | None = Header(default=None, alias="Range"),
    if_range: str | None = Header(default=None),
) -> Response:
    """The patch of this run's release from the build whose uncompressed tar has this sha256 (the
    signed manifest's `patches`), under the same token as the artifact. 404 when the release has
    no patch from that base: download the artifact instead."""
    assert caller.agent_id is not None
    services = services_of(request)
    patch = services.runs.patch_for_download(caller.agent_id, run_id, base_tar_sha256, now)
    return _ranged(
        request,
        patch,
        "patch",
        range_header,
        if_range,
        lambda start, end: services.releases.read_patch(
            patch.release_id, base_tar_sha256, start, end
        ),
    )


def _ranged(
    request: Request,
    served: ArtifactInfo,
    kind: ServedKind,
    range_header: str | None,
    if_range: str | None,
    read: Callable[[int, int], Iterator[bytes]],
) -> Response:
    """One download answer: whole, a range, or 416; its bytes counted for the release's kind."""
    etag = f'"{served.sha256}"'
    content_type = "application/gzip" if kind == "full" else "application/zstd"
    headers = {"ETag": etag, "Accept-Ranges": "bytes", "Content-Type": content_type}
    try:
        chosen = requested_range(range_header, if_range, etag=etag, size=served.length)
    except Unsatisfiable:
        headers["Content-Range"] = f"bytes */{served.length}"
        return Response(status_code=416, headers=headers)
    if chosen is None:
        start, end, status = 0, served.length - 1, 200
    else:
        start, end, status = chosen.start, chosen.end, 206
        headers["Content-Range"] = f"bytes {start}-{end}/{served.length}"
    size = max(0, end - start + 1)
    headers["Content-Length"] = str(size)
    services_of(request).releases.count_served(served.release_id, kind, size)
    return StreamingResponse(read(start, end), status_code=status, headers=headers)


# -- the operators ------------------------------------------------------------------------------


@router.post(
    API_PREFIX + "/admin/agents/{agent_id}/retry-release",
    tags=["operator"],
    response_model=ReleaseRetry,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def retry_release(
    agent_id: UUID, request: Request, caller: OperatorCaller, now: RequestNow, _body: NoBody
) -> ReleaseRetry:
    """Offer this agent again the release it rolled back: its next slot claims a token for it
    instead of being skipped with `release_rolled_back`. Recorded with the operator."""
    return services_of(request).runs.request_release_retry(
        agent_id, actor=actor_of(caller), now=now
    )


# -- the panel ------------------------------------------------------------------------------------


@router.get(
    API_PREFIX + "/agents/{agent_id}/runs",
    tags=["panel"],
    response_model=RunList,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def agent_runs(agent_id: UUID, request: Request, caller: PanelCaller) -> RunList:
    """The agent's update runs, newest first: scheduled ones and those a person started."""
    assert caller.org_id is not None
    return services_of(request).runs.agent_runs(caller.org_id, agent_id)


@router.post(
    API_PREFIX + "/agents/{agent_id}/update",
    tags=["panel"],
    response_model=RunView,
    status_code=202,
    responses={
        200: {"model": RunView, "description": "an update is already pending: that run"},
        **errors(*AUTHENTICATED, 404, 422),
    },
)
def request_update(
    agent_id: UUID,
    request: Request,
    response: Response,
    caller: PanelCaller,
    now: RequestNow,
    _body: NoBody,
) -> RunView:
    """Update this agent now (a manual update: no slot, through the caps). 202 new, 200 already
    pending."""
    assert caller.org_id is not None
    recorded = services_of(request).runs.request_manual_update(
        caller.org_id, agent_id, caller.credential_id, now=now
    )
    return recorded_run(recorded, response)


@router.get(
    API_PREFIX + "/operations",
    tags=["panel"],
    response_model=Operations,
    responses=errors(*AUTHENTICATED),
)
def operations(request: Request, caller: PanelCaller) -> Operations:
    """The task tray: operations people in this organisation started. No scheduled updates."""
    assert caller.org_id is not None
    return services_of(request).runs.operations(caller.org_id)
