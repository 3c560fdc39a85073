"""`GET /metrics`: Prometheus text, for operators (scrape with the operator key as bearer)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.reconcile.metrics import CONTENT_TYPE

__all__ = ["router"]

router = APIRouter(tags=["operator"])


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request, caller: OperatorCaller, now: RequestNow) -> PlainTextResponse:
    """Claims granted and refused by reason, runs by status and trigger, missed slots by reason,
    worker lag, notifications and webhook deliveries."""
    del caller
    text = services_of(request).reconcile.metrics.render(now)
    return PlainTextResponse(text, media_type=CONTENT_TYPE)
