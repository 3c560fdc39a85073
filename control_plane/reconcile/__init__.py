"""The reconcile worker: one replica at a time (an advisory lock) turns what the request side
wrote into missed-slot rows with their reason and one notification decision per organisation per
slot, and sends the due webhook deliveries. It is never on the claim or dispatch path.

    worker      the loop every replica runs; `now` read once per pass
    leader      the advisory lock that makes one replica the worker
    passes      one idempotent pass: missed slots, reviews, deliveries, a share of retention
    missed      which closed slots have no run (planner days) and why they were missed
    (liveness)  every replica's marks that it is up: `control_plane.liveness`
    outlived    scheduled claims still open long after their window, ended as interrupted
    review      the per-organisation, per-slot notification decision (silence included)
    data        the worker's SQL: its progress, missed rows, the review's reads and writes
    background  the refusal flusher and the worker, started and stopped beside the server

The request-side services it works with live in their domains: claim refusals in `claims`, the
notification body, inbox and webhook delivery in `notifications`, the settings in `settings`.
"""

from __future__ import annotations

from control_plane.reconcile.background import reconcile_running
from control_plane.reconcile.passes import PassReport, PassSettings, ReconcilePass
from control_plane.reconcile.worker import ReconcileWorker

__all__ = ["PassReport", "PassSettings", "ReconcilePass", "ReconcileWorker", "reconcile_running"]
