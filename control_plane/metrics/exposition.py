"""`GET /metrics` as Prometheus text exposition (format 0.0.4): pure, from a `MetricsSnapshot`."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from datetime import datetime

from control_plane.metrics.services import MetricsSnapshot, ReleaseState
from control_plane.metrics.unavailable import UNAVAILABLE_CAUSES
from ground.contract.plain_text import inert

__all__ = ["CONTENT_TYPE", "render_metrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: str) -> str:
    """A label's value as the format writes it, inert first: a label can be a version an agent
    reported, stored raw before such text was stored inert."""
    return inert(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


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


def render_metrics(snapshot: MetricsSnapshot) -> str:
    """The snapshot as Prometheus text; this replica's figures carry a `replica` label."""
    lines = _claim_families(snapshot)
    lines += _run_families(snapshot)
    lines += _reconcile_families(snapshot)
    lines += _retention_families(snapshot)
    lines += _notification_families(snapshot)
    lines += _replica_families(snapshot)
    lines += _release_families(snapshot)
    lines += _outcome_families(snapshot)
    lines += _updater_families(snapshot)
    lines += _trust_root_families(snapshot)
    lines += _family(
        "nachtwacht_agents_online",
        "gauge",
        "Live agents that polled or claimed within the last 3 minutes (the panel's online), all"
        " replicas; most of them gone at once is the way in to the replicas, not the customers.",
        [({}, snapshot.agents_online)],
    )
    lines += _family(
        "nachtwacht_enrollments_total",
        "counter",
        "Hosts' exchanges of an enrollment token, all replicas: enrolled, or the refusal's code.",
        [({"result": result}, n) for (result,), n in snapshot.enrollments],
    )
    lines += _family(
        "nachtwacht_release_bytes_served_total",
        "counter",
        "Bytes of builds served to agents, all replicas, by release and kind: `patch` (a delta"
        " from the agent's base) or `full` (the artifact: no patch fits, or one fell back).",
        [
            ({"release": r, "channel": c, "platform": p, "version": v, "kind": kind}, n)
            for (r, c, p, v, kind), n in snapshot.bytes_served
        ],
    )
    lines += _family(
        "nachtwacht_patch_fallbacks_total",
        "counter",
        "Update runs, all replicas, that took the full build although their release offered a"
        " patch, by the reason the agent reported.",
        [({"reason": reason}, n) for (reason,), n in snapshot.patch_fallbacks],
    )
    return "\n".join(lines) + "\n"


def _claim_families(snapshot: MetricsSnapshot) -> list[str]:
    """Tokens granted, and refusals here and on record."""
    replica = snapshot.replica
    lines: list[str] = []
    lines += _family(
        "nachtwacht_claims_granted_total",
        "counter",
        "Throttle tokens granted (scheduled and manual), all replicas.",
        [({}, snapshot.granted)],
    )
    lines += _family(
        "nachtwacht_claims_refused_total",
        "counter",
        "Claim requests refused by this replica since it started, by refusal code.",
        [
            ({"reason": reason, "replica": replica}, count)
            for reason, count in sorted(snapshot.refused_here.items())
        ],
    )
    lines += _family(
        "nachtwacht_claim_refusal_facts",
        "gauge",
        "Distinct (agent, slot, reason) refusals recorded, the facts behind miss reasons (kept"
        " when old ones are removed).",
        [({"reason": reason}, n) for (reason,), n in snapshot.refusal_facts],
    )
    return lines


def _run_families(snapshot: MetricsSnapshot) -> list[str]:
    """Runs by trigger and status, and missed slots by reason."""
    lines: list[str] = []
    lines += _family(
        "nachtwacht_runs",
        "gauge",
        "Update runs by trigger and status: those in flight as they stand, ended ones as they"
        " ended (kept when old runs are removed).",
        [({"trigger": trigger, "status": status}, n) for (trigger, status), n in snapshot.runs],
    )
    lines += _family(
        "nachtwacht_missed_slots",
        "gauge",
        "Missed scheduled slots by reason (kept when old runs are removed).",
        [({"reason": reason}, n) for (reason,), n in snapshot.missed],
    )
    return lines


def _reconcile_families(snapshot: MetricsSnapshot) -> list[str]:
    """How far behind the worker is, and when it last finished a pass."""
    lines: list[str] = []
    behind = (
        (snapshot.now - snapshot.reconciled_until).total_seconds()
        if snapshot.reconciled_until is not None
        else float("nan")
    )
    lines += _family(
        "nachtwacht_reconcile_lag_seconds",
        "gauge",
        "Product seconds between now and the last closed window the worker has reconciled.",
        [({}, behind)],
    )
    lines += _family(
        "nachtwacht_reconcile_last_pass_timestamp_seconds",
        "gauge",
        "When the worker last finished a pass (Unix seconds, product clock).",
        [({}, _instant(snapshot.last_pass_at))],
    )
    return lines


def _retention_families(snapshot: MetricsSnapshot) -> list[str]:
    """Rows the retention walks removed, and when the last walk completed."""
    standing = snapshot.retention
    if standing is None:
        return []
    lines = _family(
        "nachtwacht_retention_removed_rows_total",
        "counter",
        "Rows older than the retention setting removed by the worker, by table.",
        [({"table": table}, n) for table, n in sorted(standing.removed.items())],
    )
    lines += _family(
        "nachtwacht_retention_last_completed_timestamp_seconds",
        "gauge",
        "When the worker last completed a retention walk (Unix seconds, product clock).",
        [({}, _instant(standing.last_completed_at))],
    )
    return lines


def _notification_families(snapshot: MetricsSnapshot) -> list[str]:
    """Notifications written, and webhook deliveries and attempts."""
    lines: list[str] = []
    lines += _family(
        "nachtwacht_notifications_total",
        "counter",
        "Notifications written (one per organisation per slot at most).",
        [({}, snapshot.notifications)],
    )
    lines += _family(
        "nachtwacht_webhook_deliveries",
        "gauge",
        "Webhook deliveries by state (pending, delivered, failed; kept when old notifications"
        " are removed).",
        [({"state": state}, n) for (state,), n in snapshot.deliveries],
    )
    lines += _family(
        "nachtwacht_webhook_attempts_total",
        "counter",
        "Webhook delivery attempts by outcome (delivered, retry, failed).",
        [({"outcome": outcome}, n) for (outcome,), n in snapshot.attempts],
    )
    return lines


def _replica_families(snapshot: MetricsSnapshot) -> list[str]:
    """What this replica process knows of itself alone."""
    lines = _family(
        "nachtwacht_refusal_facts_dropped_total",
        "counter",
        "Refusal facts this replica could not buffer (database away too long).",
        [({"replica": snapshot.replica}, snapshot.dropped_here)],
    )
    lines += _family(
        "nachtwacht_requests_database_unavailable_total",
        "counter",
        "Requests this replica answered 503 database_unavailable since it started, by cause:"
        " pool_wait (no pooled connection in time), cancelled (a lock or statement timeout),"
        " connection (the database unreachable or gone).",
        [
            ({"cause": cause, "replica": snapshot.replica}, snapshot.unavailable_here.get(cause, 0))
            for cause in UNAVAILABLE_CAUSES
        ],
    )
    lines += _family(
        "nachtwacht_clock_offset_seconds",
        "gauge",
        "This replica's clock minus the database server's at its last liveness mark (NaN before"
        " the first, and under a fake clock).",
        [({"replica": snapshot.replica}, snapshot.clock_offset_seconds)],
    )
    return lines


def _release_families(snapshot: MetricsSnapshot) -> list[str]:
    """Stage, halt and brake per release, and the platform's brake."""
    lines = _family(
        "nachtwacht_brake_engaged",
        "gauge",
        "1 while the operators' brake of the whole platform is engaged.",
        [({}, int(snapshot.brake_engaged))],
    )

    # The managed agent's releases; nachtwacht's own agent's have families of their own.
    releases = [r for r in snapshot.releases if r.product == "agent"]

    lines += _family(
        "nachtwacht_release_stage",
        "gauge",
        "1 for the stage (canary, everyone) of each pair's current release and of every halted"
        " or braked release; `current` says which is the pair's current one.",
        [
            ({**_release_labels(r), "stage": r.stage, "current": str(r.current).lower()}, 1)
            for r in releases
        ],
    )
    lines += _family(
        "nachtwacht_release_halted",
        "gauge",
        "1 while the release is halted (on errors or by an operator) until a person resumes it.",
        [(_release_labels(r), int(r.halted)) for r in releases],
    )
    lines += _family(
        "nachtwacht_release_brake",
        "gauge",
        "1 while a brake covers the release: its own, or the platform's.",
        [(_release_labels(r), int(r.braked or snapshot.brake_engaged)) for r in releases],
    )
    return lines


def _release_labels(release: ReleaseState) -> dict[str, str]:
    """The labels that name a release in every per-release family."""
    return {"channel": release.channel, "platform": release.platform, "version": release.version}


def _updater_families(snapshot: MetricsSnapshot) -> list[str]:
    """Nachtwacht's own agent (the updater): the agents by the version they run, its releases'
    stage and how its self-updates ended."""
    lines = _family(
        "nachtwacht_agents_by_updater_version",
        "gauge",
        "Live agents by the version of nachtwacht's own agent (the updater) they last reported;"
        " only versions in use.",
        [({"version": version}, n) for (version,), n in snapshot.updater_versions],
    )
    lines += _family(
        "nachtwacht_updater_release_stage",
        "gauge",
        "1 for the stage (canary, everyone) of each pair's current updater release and of every"
        " halted or braked one; `halted` and `braked` say whether it is stopped.",
        [
            (
                {
                    **_release_labels(r),
                    "stage": r.stage,
                    "current": str(r.current).lower(),
                    "halted": str(r.halted).lower(),
                    "braked": str(r.braked or snapshot.brake_engaged).lower(),
                },
                1,
            )
            for r in snapshot.releases
            if r.product == "updater"
        ],
    )
    lines += _family(
        "nachtwacht_self_update_outcomes_total",
        "counter",
        "Self-updates (runs of an updater release) by how they ended: succeeded, up_to_date,"
        " failed, rolled_back, refused; `reason` is why (for a rollback, the one the old daemon"
        " reported). Only for updater releases offered or in use.",
        _release_outcome_samples(snapshot, "updater"),
    )
    return lines


# A label value may not be absent in one sample and present in the next without changing the
# series; a run that ended without a reason says so.
NO_REASON = "none"


def _release_outcome_samples(
    snapshot: MetricsSnapshot, product: str
) -> list[tuple[Mapping[str, str], float]]:
    """How runs of `product`'s releases ended, one sample per release, outcome and reason."""
    return [
        (
            {
                "release": str(o.release_id),
                "channel": o.channel,
                "platform": o.platform,
                "version": o.version,
                "outcome": o.outcome,
                "reason": o.reason or NO_REASON,
            },
            o.count,
        )
        for o in snapshot.release_outcomes
        if o.product == product
    ]


def _outcome_families(snapshot: MetricsSnapshot) -> list[str]:
    """How updates of each release ended, how scheduled slots ended, and the halt threshold the
    alert rules compare a failure rate with."""
    lines = _family(
        "nachtwacht_release_outcomes_total",
        "counter",
        "Update runs of a release (scheduled and manual) by how they ended: succeeded,"
        " up_to_date, failed, rolled_back, refused; `reason` is why (none for a plain ending).",
        _release_outcome_samples(snapshot, "agent"),
    )
    lines += _family(
        "nachtwacht_scheduled_slots_ended_total",
        "counter",
        "Scheduled slots by how they ended (a run's status: succeeded, up_to_date, failed,"
        " rolled_back, missed, skipped, …) and its reason (a miss's reason, a failure's).",
        [
            ({"status": status, "reason": reason or NO_REASON}, n)
            for (status, reason), n in snapshot.slot_endings
        ],
    )
    if snapshot.halt_rate_percent is not None:
        lines += _family(
            "nachtwacht_halt_threshold_ratio",
            "gauge",
            "The share of failed and rolled-back runs among a release's finished runs at which"
            " the control plane halts it (with at least the threshold's count of failures).",
            [({}, snapshot.halt_rate_percent / 100)],
        )
    return lines


def _trust_root_families(snapshot: MetricsSnapshot) -> list[str]:
    """The newest published trust root, when it expires and was published, and the live agents by
    the root they hold. While no root is published the version is 0 and its instants NaN."""
    root = snapshot.trust_root
    lines = _family(
        "nachtwacht_trust_root_version",
        "gauge",
        "The newest trust root operators published (0 while none is).",
        [({}, root.version or 0)],
    )
    lines += _family(
        "nachtwacht_trust_root_expires_timestamp_seconds",
        "gauge",
        "When the newest trust root expires (Unix seconds); from then on agents accept no"
        " release until its successor is published.",
        [({}, _instant(root.expires_at))],
    )
    lines += _family(
        "nachtwacht_trust_root_published_timestamp_seconds",
        "gauge",
        "When the newest trust root was published (Unix seconds, product clock).",
        [({}, _instant(root.published_at))],
    )
    lines += _family(
        "nachtwacht_agents_by_trust_root",
        "gauge",
        "Live agents by the trust root they hold: current (the newest, or newer), older, or none"
        " (still on their trusted-key files, or not said yet).",
        [
            ({"state": "current"}, root.agents_current),
            ({"state": "older"}, root.agents_older),
            ({"state": "none"}, root.agents_none),
        ],
    )
    lines += _family(
        "nachtwacht_unverifiable_releases",
        "gauge",
        "Releases not withdrawn signed by a release key the newest trust root does not name, by"
        " how they are offered: agents following the root refuse them (current: the pair's"
        " current release; previous: offered beyond a canary rollout's waves; stored: to hosts"
        " pinned to its version, or kept for a rollback).",
        [({"offered_as": offered_as}, n) for (offered_as,), n in snapshot.unverifiable],
    )
    return lines


def _instant(at: datetime | None) -> float:
    return at.timestamp() if at is not None else float("nan")
