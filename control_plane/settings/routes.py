"""The operators' platform settings: `GET`/`PUT /v1/admin/settings`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, services_of
from control_plane.settings.services import PlatformSettings
from ground.contract import API_PREFIX

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX + "/admin", tags=["operator"])


class SettingsBody(BaseModel):
    """Any subset of the settings; the others keep their values."""

    model_config = ConfigDict(extra="forbid")

    timezone: str | None = Field(default=None, examples=["Europe/Amsterdam"])
    catch_up_minutes: int | None = Field(default=None, examples=[15])
    org_cap: int | None = Field(default=None, description="grants per organisation per round")
    global_cap: int | None = Field(default=None, description="grants in total per round")


@router.get("/settings", response_model=PlatformSettings, responses=errors(*AUTHENTICATED))
def get_settings(request: Request, caller: OperatorCaller) -> PlatformSettings:
    """The platform's time zone, catch-up window and caps."""
    del caller
    return services_of(request).settings.get()


@router.put("/settings", response_model=PlatformSettings, responses=errors(*AUTHENTICATED, 422))
def put_settings(body: SettingsBody, request: Request, caller: OperatorCaller) -> PlatformSettings:
    """Change any of the settings; each value is validated and a bad one named in a 422."""
    del caller
    return services_of(request).settings.update(body.model_dump(exclude_none=True))
