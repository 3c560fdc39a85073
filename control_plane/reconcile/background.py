"""What every replica runs beside its HTTP server: the refusal flusher and the reconcile loop."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from control_plane.reconcile.worker import ReconcileWorker
from control_plane.registry import Services
from control_plane.types import Pool
from ground.clock import Clock

__all__ = ["reconcile_running"]


@contextlib.contextmanager
def reconcile_running(
    pool: Pool, clock: Clock, database_url: str, services: Services
) -> Iterator[ReconcileWorker]:
    """Start the flusher and the worker loop; on exit stop both, writing the buffered refusals
    and giving up the worker's lock so another replica takes over at once.

    `pool` is the worker's own and is closed on exit before the loop is waited for: a loop
    waiting for a connection while the database is down is woken at once, so a replica asked to
    stop stops within seconds rather than after the pool's whole wait."""
    # Flushed well inside the worker's settle margin, also on a fast fake clock.
    services.refusals.start(interval_seconds=min(1.0, max(0.05, clock.real_seconds(5))))
    worker = ReconcileWorker(
        pool,
        clock,
        database_url,
        identity=services.replica,
        addresses=services.webhook_policy,
        clock_watch=services.clock_watch,
    )
    worker.start()
    try:
        yield worker
    finally:
        worker.ask_to_stop()
        pool.close()
        worker.stop()
        services.refusals.stop()
