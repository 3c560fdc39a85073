"""The organisation's inbox (`GET /v1/notifications`, marking one read or unread) and its webhook
(`PUT`/`GET`/`DELETE /v1/webhook`)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import PanelCaller, RequestNow, services_of
from control_plane.api.no_body import NoBody
from control_plane.notifications.services import (
    MAX_PAGE,
    NotificationPage,
    NotificationView,
    SavedWebhook,
    WebhookView,
)
from ground.contract import API_PREFIX

__all__ = ["router"]

router = APIRouter(prefix=API_PREFIX, tags=["panel"])


class ReadBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    read: StrictBool = Field(default=True, description="false marks it unread again")


class WebhookBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Typed loosely on purpose: the service names the field and the value in its 422.
    url: Any = Field(description="http:// or https:// URL that receives each notification")
    secret: Any = Field(
        default=None,
        description="shared secret for the HMAC-SHA256 signature (16-200 characters); "
        "left out, one is generated and returned once",
    )


@router.get(
    "/notifications", response_model=NotificationPage, responses=errors(*AUTHENTICATED, 422)
)
def list_notifications(
    request: Request,
    caller: PanelCaller,
    unread: bool = Query(default=False, description="only unread notifications"),
    # The service enforces 1 to MAX_PAGE with its own 422; the schema states the same bound.
    limit: int = Query(
        default=50,
        description="at most this many, newest first",
        json_schema_extra={"minimum": 1, "maximum": MAX_PAGE},
    ),
) -> NotificationPage:
    """One notification per slot that had something to tell, newest first, with the unread count."""
    assert caller.org_id is not None
    return services_of(request).notifications.list(caller.org_id, unread_only=unread, limit=limit)


@router.post(
    "/notifications/{notification_id}/read",
    response_model=NotificationView,
    responses=errors(*AUTHENTICATED, 404, 422),
)
def mark_read(
    notification_id: UUID,
    request: Request,
    caller: PanelCaller,
    now: RequestNow,
    body: ReadBody | None = None,
) -> NotificationView:
    """Mark a notification read (or, with `{"read": false}`, unread)."""
    assert caller.org_id is not None
    read = True if body is None else body.read
    return services_of(request).notifications.mark_read(
        caller.org_id, notification_id, read=read, now=now
    )


@router.put(
    "/webhook",
    response_model=SavedWebhook,
    # `secret` is in the answer only when the control plane generated it.
    response_model_exclude_none=True,
    responses=errors(*AUTHENTICATED, 422),
)
def put_webhook(
    body: WebhookBody, request: Request, caller: PanelCaller, now: RequestNow
) -> SavedWebhook:
    """Send every new notification to `url`, signed with the secret."""
    assert caller.org_id is not None
    return services_of(request).webhooks.put(
        caller.org_id, url=body.url, secret=body.secret, now=now
    )


@router.get("/webhook", response_model=WebhookView, responses=errors(*AUTHENTICATED, 404))
def get_webhook(request: Request, caller: PanelCaller) -> WebhookView:
    """The webhook's URL and its deliveries by state (never the secret)."""
    assert caller.org_id is not None
    return services_of(request).webhooks.get(caller.org_id)


@router.delete(
    "/webhook", status_code=204, response_class=Response, responses=errors(*AUTHENTICATED, 422)
)
def delete_webhook(request: Request, caller: PanelCaller, _body: NoBody) -> Response:
    """Stop sending notifications to the webhook (the inbox keeps them)."""
    assert caller.org_id is not None
    services_of(request).webhooks.delete(caller.org_id)
    return Response(status_code=204)
