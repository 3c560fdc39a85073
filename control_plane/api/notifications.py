"""The organisation's inbox: `GET /v1/notifications`, and marking one read or unread."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from control_plane.api.deps import PanelCaller, services_of

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["panel"])


class ReadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    read: StrictBool = Field(default=True, description="false marks it unread again")


@router.get("/notifications")
def list_notifications(
    request: Request,
    caller: PanelCaller,
    unread: bool = Query(default=False, description="only unread notifications"),
    limit: int = Query(default=50, description="at most this many, newest first (1-200)"),
) -> dict[str, Any]:
    """One notification per slot that had something to tell, newest first, with the unread count."""
    assert caller.org_id is not None
    return services_of(request).reconcile.notifications.list(
        caller.org_id, unread_only=unread, limit=limit
    )


@router.post("/notifications/{notification_id}/read")
def mark_read(
    notification_id: UUID, request: Request, caller: PanelCaller, body: ReadBody | None = None
) -> dict[str, Any]:
    """Mark a notification read (or, with `{"read": false}`, unread)."""
    assert caller.org_id is not None
    read = True if body is None else body.read
    return services_of(request).reconcile.notifications.mark_read(
        caller.org_id, notification_id, read=read
    )
