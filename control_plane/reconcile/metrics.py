"""`GET /metrics`: Prometheus text exposition (format 0.0.4), for operators.

Figures stored in the database are the platform's (every replica reports the same); figures kept
in memory (refused claim requests) are this replica's, labelled with `replica`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime

from control_plane.reconcile.progress import read_progress
from control_plane.reconcile.refusals import RefusalRecorder
from control_plane.types import Pool

__all__ = ["CONTENT_TYPE", "MetricsService", "render_metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    # Full precision: `:g` would print a Unix time as 1.79601e+09.
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[Mapping[str, str], float]]
) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        rendered = ",".join(f'{key}="{_escape(val)}"' for key, val in sorted(labels.items()))
        sample = f"{name}{{{rendered}}}" if rendered else name
        lines.append(f"{sample} {_number(value)}")
    return lines


def render_metrics(pool: Pool, refusals: RefusalRecorder, *, now: datetime, replica: str) -> str:
    with pool.connection() as conn:
        granted = conn.execute("SELECT count(*) AS n FROM tokens").fetchone()
        runs = conn.execute(
            "SELECT trigger, status, count(*) AS n FROM runs GROUP BY trigger, status"
            " ORDER BY trigger, status"
        ).fetchall()
        missed = conn.execute(
            "SELECT miss_reason, count(*) AS n FROM runs WHERE status = 'missed'"
            " GROUP BY miss_reason ORDER BY miss_reason"
        ).fetchall()
        facts = conn.execute(
            "SELECT reason, count(*) AS n FROM claim_refusals GROUP BY reason ORDER BY reason"
        ).fetchall()
        notifications = conn.execute("SELECT count(*) AS n FROM notifications").fetchone()
        deliveries = conn.execute(
            "SELECT state, count(*) AS n FROM webhook_deliveries GROUP BY state ORDER BY state"
        ).fetchall()
        attempts = conn.execute(
            "SELECT outcome, count(*) AS n FROM webhook_attempts GROUP BY outcome ORDER BY outcome"
        ).fetchall()
        progress = read_progress(conn)
    assert granted is not None and notifications is not None
    lines: list[str] = []
    lines += _family(
        "nachtwacht_claims_granted_total",
        "counter",
        "Throttle tokens granted (scheduled and manual), all replicas.",
        [({}, granted["n"])],
    )
    lines += _family(
        "nachtwacht_claims_refused_total",
        "counter",
        "Claim requests refused by this replica since it started, by refusal code.",
        [
            ({"reason": reason, "replica": replica}, count)
            for reason, count in sorted(refusals.refused_counts().items())
        ],
    )
    lines += _family(
        "nachtwacht_claim_refusal_facts",
        "gauge",
        "Distinct (agent, slot, reason) refusals on record, the facts behind miss reasons.",
        [({"reason": row["reason"]}, row["n"]) for row in facts],
    )
    lines += _family(
        "nachtwacht_runs",
        "gauge",
        "Update runs by trigger and status.",
        [({"trigger": row["trigger"], "status": row["status"]}, row["n"]) for row in runs],
    )
    lines += _family(
        "nachtwacht_missed_slots",
        "gauge",
        "Missed scheduled slots by reason.",
        [({"reason": row["miss_reason"]}, row["n"]) for row in missed],
    )
    behind = (
        (now - progress.reconciled_until).total_seconds()
        if progress.reconciled_until is not None
        else float("nan")
    )
    lines += _family(
        "nachtwacht_reconcile_lag_seconds",
        "gauge",
        "Product seconds between now and the last closed window the worker has reconciled.",
        [({}, behind)],
    )
    last_pass = (
        progress.last_pass_at.timestamp() if progress.last_pass_at is not None else float("nan")
    )
    lines += _family(
        "nachtwacht_reconcile_last_pass_timestamp_seconds",
        "gauge",
        "When the worker last finished a pass (Unix seconds, product clock).",
        [({}, last_pass)],
    )
    lines += _family(
        "nachtwacht_notifications_total",
        "counter",
        "Notifications written (one per organisation per slot at most).",
        [({}, notifications["n"])],
    )
    lines += _family(
        "nachtwacht_webhook_deliveries",
        "gauge",
        "Webhook deliveries by state (pending, delivered, failed).",
        [({"state": row["state"]}, row["n"]) for row in deliveries],
    )
    lines += _family(
        "nachtwacht_webhook_attempts_total",
        "counter",
        "Webhook delivery attempts by outcome (delivered, retry, failed).",
        [({"outcome": row["outcome"]}, row["n"]) for row in attempts],
    )
    lines += _family(
        "nachtwacht_refusal_facts_dropped_total",
        "counter",
        "Refusal facts this replica could not buffer (database away too long).",
        [({"replica": replica}, refusals.dropped)],
    )
    return "\n".join(lines) + "\n"


class MetricsService:
    def __init__(self, pool: Pool, refusals: RefusalRecorder, replica: str) -> None:
        self._pool = pool
        self._refusals = refusals
        self._replica = replica

    def render(self, now: datetime) -> str:
        return render_metrics(self._pool, self._refusals, now=now, replica=self._replica)
