"""Trust roots: the operators publish (`POST /v1/admin/trust-roots`, the root file's exact bytes
as the body) and list them (`GET`); agents fetch a version's exact bytes (`trust_root_path`)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import (
    AgentCaller,
    OperatorCaller,
    RequestNow,
    in_database_thread,
    services_of,
)
from control_plane.errors import NotFound
from control_plane.trust_roots.services import PublishedTrustRoot, TrustRootList
from ground.contract import API_PREFIX, TRUST_ROOTS_PATH
from signed_release.trust_root import MAX_ROOT_BYTES

__all__ = ["router"]

router = APIRouter(tags=["trust roots"])

# A published version never changes, so whoever has fetched it may keep it.
_FOREVER = "public, max-age=31536000, immutable"

_ROOT_FILE = {
    "content": {
        "application/json": {
            "schema": {
                "type": "string",
                "format": "binary",
                "description": "a TUF root metadata file, exactly as signed",
            }
        }
    },
}


@router.post(
    API_PREFIX + "/admin/trust-roots",
    status_code=201,
    response_model=PublishedTrustRoot,
    responses={
        200: {
            "model": PublishedTrustRoot,
            "description": "these exact bytes were already published (`already_published`)",
        },
        **errors(*AUTHENTICATED, 409, 422),
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": f"the root file's exact bytes (at most {MAX_ROOT_BYTES} bytes)",
            **_ROOT_FILE,
        }
    },
    tags=["operator"],
)
async def publish_trust_root(
    request: Request, response: Response, caller: OperatorCaller, now: RequestNow
) -> PublishedTrustRoot:
    """Store the next trust root, as given. Refused (422 `trust_root_rejected`, naming why)
    unless it is the version after the newest stored and signed by a threshold of that root's
    root keys and of its own (the first: version 1, signed by a threshold of its own root keys),
    and not expired: a root the agents would refuse is never served. Other bytes under a
    published version: 409 `trust_root_version_taken`; the same bytes again: 200."""
    body = await request.body()
    services = services_of(request)
    published = await in_database_thread(
        request, lambda: services.trust_roots.publish(body, now=now, actor=actor_of(caller))
    )
    if published.already_published:
        response.status_code = 200
    return published


@router.get(
    API_PREFIX + "/admin/trust-roots",
    response_model=TrustRootList,
    responses=errors(*AUTHENTICATED),
    tags=["operator"],
)
def list_trust_roots(request: Request, caller: OperatorCaller) -> TrustRootList:
    """Every published version, newest first, with how many agents said they hold it; how many
    hold none and how many hold a version older than the newest."""
    del caller
    return services_of(request).trust_roots.list()


@router.get(
    TRUST_ROOTS_PATH + "/{version}",
    response_class=Response,
    responses={
        200: {"description": "the exact bytes of this version", **_ROOT_FILE},
        **errors(*AUTHENTICATED, 404, 422, by_reference=True),
    },
    tags=["agent"],
)
def trust_root(version: int, request: Request, caller: AgentCaller) -> Response:
    """The exact bytes of trust root `version`, to verify against the root the agent holds;
    404 until that version is published. A version never changes, so it may be cached."""
    del caller
    body = services_of(request).trust_roots.body(version)
    if body is None:
        raise NotFound(f"trust root v{version} is not published", code="trust_root_not_found")
    return Response(
        content=body, media_type="application/json", headers={"Cache-Control": _FOREVER}
    )
