"""The operators' endpoints."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from control_plane.api.deps import OperatorCaller, services_of

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
