"""Publishing a signed release: `POST /v1/admin/releases`."""

from __future__ import annotations

import base64
import binascii

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.errors import InvalidInput
from control_plane.releases.services import PublishedRelease
from ground.contract import API_PREFIX

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX + "/admin", tags=["operator"])


class ReleaseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    manifest_b64: str = Field(description="the exact bytes of manifest.json, base64")
    signature_b64: str = Field(description="the exact bytes of manifest.sig, base64")
    artifact_b64: str = Field(description="the build (.tar.gz), base64")


def _decoded(field: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInput(field, value[:20] + "…", "is not valid base64") from exc


@router.post(
    "/releases",
    status_code=201,
    response_model=PublishedRelease,
    responses={
        200: {
            "model": PublishedRelease,
            "description": "this exact manifest was already published (`already_published`)",
        },
        **errors(*AUTHENTICATED, 409, 422),
    },
)
def publish_release(
    body: ReleaseBody,
    request: Request,
    response: Response,
    caller: OperatorCaller,
    now: RequestNow,
) -> PublishedRelease:
    """Store a release after checking its signature against the pinned keys, its artifact against
    the manifest, its expiry, and that it is newer than every release of its (channel, platform);
    it becomes that pair's current release. The exact same manifest again is a 200, not an
    error."""
    published = services_of(request).releases.publish(
        _decoded("manifest_b64", body.manifest_b64),
        _decoded("signature_b64", body.signature_b64),
        _decoded("artifact_b64", body.artifact_b64),
        now=now,
        actor=actor_of(caller),
    )
    if published.already_published:
        response.status_code = 200
    return published
