"""The organisation's webhook: `PUT`/`GET`/`DELETE /v1/webhook`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from control_plane.api.deps import PanelCaller, services_of

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["panel"])


class WebhookBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Typed loosely on purpose: the service names the field and the value in its 422.
    url: Any = Field(description="http:// or https:// URL that receives each notification")
    secret: Any = Field(
        default=None,
        description="shared secret for the HMAC-SHA256 signature (16-200 characters); "
        "left out, one is generated and returned once",
    )


@router.put("/webhook")
def put_webhook(body: WebhookBody, request: Request, caller: PanelCaller) -> dict[str, Any]:
    """Send every new notification to `url`, signed with the secret."""
    assert caller.org_id is not None
    return services_of(request).reconcile.webhooks.put(
        caller.org_id, url=body.url, secret=body.secret
    )


@router.get("/webhook")
def get_webhook(request: Request, caller: PanelCaller) -> dict[str, Any]:
    """The webhook's URL and its deliveries by state (never the secret)."""
    assert caller.org_id is not None
    return services_of(request).reconcile.webhooks.get(caller.org_id)


@router.delete("/webhook", status_code=204, response_model=None)
def delete_webhook(request: Request, caller: PanelCaller) -> Response:
    """Stop sending notifications to the webhook (the inbox keeps them)."""
    assert caller.org_id is not None
    services_of(request).reconcile.webhooks.delete(caller.org_id)
    return Response(status_code=204)
