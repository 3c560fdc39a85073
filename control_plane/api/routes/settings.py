"""The operators' platform settings: `GET`/`PUT /v1/admin/settings`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from control_plane.accounts.services import actor_of
from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.errors import InvalidInput
from control_plane.settings.services import (
    MAX_RETENTION_DAYS,
    MIN_RETENTION_DAYS,
    PlatformSettings,
)
from ground.contract import API_PREFIX
from ground.limits import MAX_CAP, MAX_CATCH_UP_MINUTES, MIN_CAP, MIN_CATCH_UP_MINUTES

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX + "/admin", tags=["operator"])


class SettingsBody(BaseModel):
    """Any subset of the settings; the others keep their values."""

    model_config = ConfigDict(extra="forbid")

    # Strict: `false` is not the number 0 (it once set a cap to 0 and halted every update) and
    # `"5"` is not 5. The bounds are checked by `PlatformSettings`, whose messages name them; the
    # schema states them for generated clients.
    timezone: str | None = Field(
        default=None, strict=True, max_length=64, examples=["Europe/Amsterdam"]
    )
    catch_up_minutes: int | None = Field(
        default=None,
        strict=True,
        examples=[15],
        json_schema_extra={"minimum": MIN_CATCH_UP_MINUTES, "maximum": MAX_CATCH_UP_MINUTES},
    )
    grant_margin_seconds: int | None = Field(
        default=None,
        strict=True,
        description="no new token for a slot in its window's last this many seconds, where its"
        " download could not finish before the switch is refused (0: until the window closes;"
        " less than the window)",
        examples=[60],
        json_schema_extra={"minimum": 0, "maximum": MAX_CATCH_UP_MINUTES * 60 - 1},
    )
    org_cap: int | None = Field(
        default=None,
        strict=True,
        description="grants per organisation per round (at most global_cap)",
        json_schema_extra={"minimum": MIN_CAP, "maximum": MAX_CAP},
    )
    global_cap: int | None = Field(
        default=None,
        strict=True,
        description="grants in total per round",
        json_schema_extra={"minimum": MIN_CAP, "maximum": MAX_CAP},
    )
    retention_days: int | None = Field(
        default=None,
        strict=True,
        description="days runs, their events and notifications are kept; older ones are removed",
        examples=[400],
        json_schema_extra={"minimum": MIN_RETENTION_DAYS, "maximum": MAX_RETENTION_DAYS},
    )


@router.get("/settings", response_model=PlatformSettings, responses=errors(*AUTHENTICATED))
def get_settings(request: Request, caller: OperatorCaller) -> PlatformSettings:
    """The platform's time zone, catch-up window and its grant margin, caps and how long history
    is kept."""
    del caller
    return services_of(request).settings.get()


@router.put("/settings", response_model=PlatformSettings, responses=errors(*AUTHENTICATED, 422))
def put_settings(
    body: SettingsBody, request: Request, caller: OperatorCaller, now: RequestNow
) -> PlatformSettings:
    """Change any of the settings; each value is validated and a bad one named in a 422. Caps are
    at least 1 (stop updates with the brake) and `org_cap` is at most `global_cap`. A field left
    out keeps its value; null is refused."""
    changes = body.model_dump(exclude_unset=True)
    for name, value in changes.items():
        if value is None:
            # Not "keep the value": a client sending null for "no margin" or "no cap" must not
            # be told 200 while the setting stays as it was.
            raise InvalidInput(
                name,
                None,
                "",
                message=f"{name}: null is not a value (leave the field out to keep its value)",
            )
    return services_of(request).settings.update(changes, now=now, actor=actor_of(caller))
