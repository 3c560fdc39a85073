"""The reconcile package's request-side services, built once per process beside the others."""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.reconcile.forecast_service import ForecastService
from control_plane.reconcile.inbox import NotificationService, WebhookSettingsService
from control_plane.reconcile.metrics import MetricsService
from control_plane.reconcile.refusals import RefusalRecorder
from control_plane.reconcile.worker import replica_identity
from control_plane.types import Pool
from ground.clock import Clock

__all__ = ["ReconcileServices", "build_reconcile_services"]


@dataclass(frozen=True, kw_only=True)
class ReconcileServices:
    """What the routes of this package need; built once per process with the other services."""

    refusals: RefusalRecorder
    notifications: NotificationService
    webhooks: WebhookSettingsService
    forecast: ForecastService
    metrics: MetricsService
    replica: str  # names this process in the worker's progress row and in the metrics


def build_reconcile_services(pool: Pool, clock: Clock) -> ReconcileServices:
    refusals = RefusalRecorder(pool)
    replica = replica_identity()
    return ReconcileServices(
        refusals=refusals,
        notifications=NotificationService(pool, clock),
        webhooks=WebhookSettingsService(pool, clock),
        forecast=ForecastService(pool),
        metrics=MetricsService(pool, refusals, replica),
        replica=replica,
    )
