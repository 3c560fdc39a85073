"""The operators' endpoints."""

from __future__ import annotations

import base64
import binascii
from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from control_plane.api.deps import OperatorCaller, services_of
from control_plane.errors import InvalidInput

__all__ = ["router"]

router = APIRouter(prefix="/v1/admin", tags=["operator"])


class SettingsBody(BaseModel):
    """Any subset of the settings; the others keep their values."""

    model_config = ConfigDict(extra="forbid")

    timezone: str | None = Field(default=None, examples=["Europe/Amsterdam"])
    catch_up_minutes: int | None = Field(default=None, examples=[15])
    org_cap: int | None = Field(default=None, description="grants per organisation per round")
    global_cap: int | None = Field(default=None, description="grants in total per round")


@router.get("/settings")
def get_settings(request: Request, caller: OperatorCaller) -> dict[str, Any]:
    """The platform's time zone, catch-up window and caps."""
    del caller
    return services_of(request).settings.get().as_dict()


@router.put("/settings")
def put_settings(body: SettingsBody, request: Request, caller: OperatorCaller) -> dict[str, Any]:
    """Change any of the settings; each value is validated and a bad one named in a 422."""
    del caller
    changes = body.model_dump(exclude_none=True)
    return services_of(request).settings.update(changes).as_dict()


class BrakeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engaged: StrictBool
    reason: str | None = Field(default=None, max_length=500, examples=["bad build 1.5.0"])
    revoke_outstanding: StrictBool = Field(
        default=True, description="also revoke tokens granted but not yet used"
    )


@router.get("/brake")
def get_brake(request: Request, caller: OperatorCaller) -> dict[str, Any]:
    """Whether the emergency brake is engaged, why, and since when."""
    del caller
    return services_of(request).brake.get()


@router.put("/brake")
def put_brake(body: BrakeBody, request: Request, caller: OperatorCaller) -> dict[str, Any]:
    """Engage the brake (claims refused, outstanding tokens revoked) or release it. No customer
    setting changes."""
    return services_of(request).brake.set(
        engaged=body.engaged,
        reason=body.reason,
        revoke_outstanding=body.revoke_outstanding,
        by=caller.credential_id,
    )


@router.post("/tokens/{token_id}/revoke")
def revoke_token(token_id: UUID, request: Request, caller: OperatorCaller) -> dict[str, Any]:
    """Revoke one throttle token: its run's download is refused from now on."""
    del caller
    return services_of(request).brake.revoke_token(token_id)


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


@router.post("/releases", status_code=201)
def publish_release(body: ReleaseBody, request: Request, caller: OperatorCaller) -> dict[str, Any]:
    """Store a release after checking its signature against the pinned keys, its artifact against
    the manifest, its expiry, and that it is newer than the current one."""
    del caller
    return services_of(request).releases.publish(
        _decoded("manifest_b64", body.manifest_b64),
        _decoded("signature_b64", body.signature_b64),
        _decoded("artifact_b64", body.artifact_b64),
    )
