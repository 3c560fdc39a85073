"""The reconcile worker and what it feeds: missed slots with their reason, the notifications
(grouped per organisation per slot, inbox and signed webhook), the capacity forecast, the metrics.

    refusals   RefusalRecorder: claim refusals buffered in memory, flushed in batches
    missed     missed run rows with offline | throttled | brake | unknown
    review     the per-organisation, per-slot notification decision (silence included)
    summary    the notification body
    webhook    signing, verification and delivery with retries
    passes     one idempotent pass; progress: where the last one stopped
    leader     the advisory lock; worker: the loop every replica runs
    forecast   the per-slot capacity forecast (pure) and its service
    inbox      the organisation's notifications and webhook settings
    metrics    Prometheus text
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.reconcile.forecast import SlotForecast, fair_shares, forecast_slot
from control_plane.reconcile.forecast_service import ForecastService
from control_plane.reconcile.inbox import NotificationService, WebhookSettingsService
from control_plane.reconcile.refusals import RefusalRecorder
from control_plane.reconcile.webhook import sign_body, verify_signature
from control_plane.reconcile.worker import ReconcileWorker, replica_identity
from control_plane.types import Pool
from nachtwacht.clock import Clock

__all__ = [
    "ForecastService",
    "NotificationService",
    "ReconcileServices",
    "ReconcileWorker",
    "RefusalRecorder",
    "SlotForecast",
    "WebhookSettingsService",
    "build_reconcile_services",
    "fair_shares",
    "forecast_slot",
    "replica_identity",
    "sign_body",
    "verify_signature",
]


@dataclass(frozen=True, kw_only=True)
class ReconcileServices:
    """What the routes of this package need; built once per process with the other services."""

    refusals: RefusalRecorder
    notifications: NotificationService
    webhooks: WebhookSettingsService
    forecast: ForecastService
    replica: str


def build_reconcile_services(pool: Pool, clock: Clock) -> ReconcileServices:
    return ReconcileServices(
        refusals=RefusalRecorder(pool),
        notifications=NotificationService(pool, clock),
        webhooks=WebhookSettingsService(pool, clock),
        forecast=ForecastService(pool),
        replica=replica_identity(),
    )
