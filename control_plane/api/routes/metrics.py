"""`GET /metrics`: Prometheus text, for operators (scrape with the operator key as bearer)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse

from control_plane.api.answers import AUTHENTICATED, errors
from control_plane.api.deps import OperatorCaller, RequestNow, services_of
from control_plane.metrics.exposition import CONTENT_TYPE, render_metrics

__all__ = ["router"]

router = APIRouter(tags=["operator"])


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    responses={
        200: {
            "content": {CONTENT_TYPE: {"schema": {"type": "string"}}},
            "description": "Prometheus text exposition, format 0.0.4",
        },
        **errors(*AUTHENTICATED, by_reference=True),
    },
)
def metrics(request: Request, caller: OperatorCaller, now: RequestNow) -> PlainTextResponse:
    """Claims granted and refused by reason, runs by status and trigger, missed slots by reason,
    worker lag, notifications and webhook deliveries, each release's state and its updates'
    outcomes by reason, scheduled slots by how they ended, the halt threshold, and the newest
    trust root (version, expiry, publish time) with the agents by the root they hold."""
    del caller
    snapshot = services_of(request).metrics.snapshot(now)
    return PlainTextResponse(render_metrics(snapshot), media_type=CONTENT_TYPE)
