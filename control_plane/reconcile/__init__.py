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

from control_plane.reconcile.forecast import SlotForecast, fair_shares, forecast_slot
from control_plane.reconcile.forecast_service import ForecastService
from control_plane.reconcile.inbox import NotificationService, WebhookSettingsService
from control_plane.reconcile.metrics import MetricsService
from control_plane.reconcile.refusals import RefusalRecorder
from control_plane.reconcile.services import ReconcileServices, build_reconcile_services
from control_plane.reconcile.webhook import sign_body, verify_signature
from control_plane.reconcile.worker import ReconcileWorker, replica_identity

__all__ = [
    "ForecastService",
    "MetricsService",
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
