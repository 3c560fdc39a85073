"""The body of one organisation's notification for one slot: pure, from the slot's run rows.

Forty agents on release day are one message: updated agents are counted per version and
up-to-date agents counted, neither listed; an agent is named only where a person may have to act —
a failure (only at its first mention of the calendar day), a miss with its reason, a run without
an outcome, an agent silent for three days.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from ground.contract import MissReason, format_instant

__all__ = ["SlotOutcome", "StaleAgent", "is_worth_telling", "notification_body"]

# `unauthorised`: a switch the control plane had not authorised (after revocation, expiry or the
# window) — someone should look at that host as at a failure.
FAILED_STATUSES = frozenset({"failed", "rolled_back", "unauthorised"})


@dataclass(frozen=True, kw_only=True)
class SlotOutcome:
    """One scheduled run of the slot, as the summary needs it."""

    agent_id: UUID
    agent_name: str
    status: str
    version: str | None = None
    error: str | None = None
    # Why a failed or rolled-back run ended so (`ground.contract.OutcomeReason`'s value).
    outcome_reason: str | None = None
    miss_reason: MissReason | str | None = None
    # A `host_clock` miss: the host's clock minus the control plane's, in seconds, as measured.
    host_clock_offset_seconds: int | None = None
    # `updater`: the run updated nachtwacht's own agent (its failure says so); else `agent`.
    product: str = "agent"


@dataclass(frozen=True, kw_only=True)
class StaleAgent:
    agent_id: UUID
    agent_name: str
    last_consumed_at: datetime | None


def _agent(outcome: SlotOutcome) -> dict[str, Any]:
    return {"agent_id": str(outcome.agent_id), "name": outcome.agent_name}


def notification_body(
    *,
    slot_key: str,
    slot_at: datetime,
    zone: ZoneInfo,
    outcomes: Sequence[SlotOutcome],
    newly_named_failures: Iterable[UUID],
    stale: Sequence[StaleAgent],
) -> dict[str, Any]:
    """The summary: counts for everything, names where a person has something to do."""
    named = set(newly_named_failures)
    counts: Counter[str] = Counter(outcome.status for outcome in outcomes)
    updated = Counter(o.version or "unknown" for o in outcomes if o.status == "succeeded")
    failures = [o for o in outcomes if o.status in FAILED_STATUSES and o.agent_id in named]
    repeated = sum(1 for o in outcomes if o.status in FAILED_STATUSES and o.agent_id not in named)
    missed = [o for o in outcomes if o.status == "missed"]
    no_outcome = [o for o in outcomes if o.status == "claimed"]
    body: dict[str, Any] = {
        "kind": "scheduled_updates",
        "slot": {
            "key": slot_key,
            "at": format_instant(slot_at),
            "local_time": slot_at.astimezone(zone).isoformat(),
            "timezone": zone.key,
        },
        "counts": {
            "agents": len(outcomes),
            "updated": counts["succeeded"],
            "up_to_date": counts["up_to_date"],
            "failed": counts["failed"],
            "rolled_back": counts["rolled_back"],
            "missed": counts["missed"],
            "no_outcome": counts["claimed"],
            "unauthorised": counts["unauthorised"],
            # Consumed without a token: nothing to do for them (a release they rolled back).
            "skipped": counts["skipped"],
        },
        "updated": [
            {"version": version, "count": count} for version, count in sorted(updated.items())
        ],
        "failed": [
            {
                **_agent(o),
                "status": o.status,
                "version": o.version,
                "reason": o.outcome_reason,
                "error": o.error,
                **({"product": "updater"} if o.product == "updater" else {}),
            }
            for o in sorted(failures, key=lambda o: o.agent_name)
        ],
        "failures_already_reported_today": repeated,
        "missed": [
            {
                **_agent(o),
                "reason": o.miss_reason,
                **(
                    {}
                    if o.host_clock_offset_seconds is None
                    else {"host_clock_offset_seconds": o.host_clock_offset_seconds}
                ),
                # An `unreachable` miss: the agent's first error, as it said it.
                **(
                    {"unreachable_error": o.error}
                    if o.miss_reason == MissReason.UNREACHABLE and o.error
                    else {}
                ),
            }
            for o in sorted(missed, key=lambda o: o.agent_name)
        ],
        "missed_by_reason": dict(sorted(Counter(o.miss_reason for o in missed).items())),
        "no_outcome": [_agent(o) for o in sorted(no_outcome, key=lambda o: o.agent_name)],
        "not_updated_for_three_days": [
            {
                "agent_id": str(agent.agent_id),
                "name": agent.agent_name,
                "last_consumed_at": (
                    None
                    if agent.last_consumed_at is None
                    else format_instant(agent.last_consumed_at)
                ),
            }
            for agent in sorted(stale, key=lambda a: a.agent_name)
        ],
    }
    body["summary"] = _summary_line(body)
    return body


def is_worth_telling(body: Mapping[str, Any]) -> bool:
    """Silence when every agent was already up to date or only repeated a reported failure."""
    return any(
        body[section]
        for section in ("updated", "failed", "missed", "no_outcome", "not_updated_for_three_days")
    )


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _summary_line(body: Mapping[str, Any]) -> str:
    counts = body["counts"]
    parts = [f"{group['count']} updated to {group['version']}" for group in body["updated"]]
    if counts["up_to_date"]:
        parts.append(f"{counts['up_to_date']} already up to date")
    if counts["failed"]:
        parts.append(f"{counts['failed']} failed")
    if counts["rolled_back"]:
        parts.append(f"{counts['rolled_back']} rolled back")
    if counts["unauthorised"]:
        parts.append(f"{counts['unauthorised']} switched without authorisation")
    if counts["skipped"]:
        parts.append(f"{counts['skipped']} skipped (a release they rolled back)")
    if counts["missed"]:
        reasons = ", ".join(f"{n} {why}" for why, n in body["missed_by_reason"].items())
        parts.append(f"{counts['missed']} missed ({reasons})")
    if counts["no_outcome"]:
        parts.append(f"{counts['no_outcome']} without an outcome yet")
    line = f"{body['slot']['key'].replace('T', ' ')}: {_plural(counts['agents'], 'agent')}"
    if parts:
        line += " — " + ", ".join(parts)
    stale = len(body["not_updated_for_three_days"])
    if stale:
        line += f"; {_plural(stale, 'agent')} not updated for three days"
    return line
