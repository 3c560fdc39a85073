"""How a run row reads in the API (the agent page, the run lists, the task tray, the agent's
reports), and the queries that read it that way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from control_plane.types import Connection
from ground.contract import Instant, MissReason, OutcomeReason, PatchFallbackReason, stored_code

__all__ = [
    "RUN_COLUMNS",
    "Operation",
    "RunView",
    "StoppedBy",
    "latest_run_per_agent",
    "latest_runs",
    "operation_view",
    "read_run",
    "run_view",
]

# What stopped the release of a slot skipped `release_halted` (`runs.stopped_by`).
StoppedBy = Literal["halt", "brake"]

RUN_COLUMNS = (
    "r.id, r.agent_id, r.trigger, r.slot_key, r.slot_at, r.status, r.from_version, r.version,"
    " r.error, r.created_at, r.claimed_at, r.finished_at, rel.agent_version AS release_version,"
    " r.miss_reason, r.outcome_reason, r.switched_at, r.skip_reason, r.outcome_inferred,"
    " r.delivery, r.patch_fallback_reason, r.stopped_by"
)


@dataclass(frozen=True, kw_only=True)
class RunView:
    run_id: UUID
    agent_id: UUID
    trigger: str
    slot_key: str | None
    slot_at: Instant | None
    status: str
    from_version: str | None
    release_version: str | None
    version: str | None
    error: str | None
    # The codes below are text as it is when a newer release recorded a value this one does not
    # know (`stored_code`).
    miss_reason: MissReason | str | None
    # Why it ended so, as the agent reported it or the reconcile inferred it.
    reason: OutcomeReason | str | None = None
    # When the agent says it switched to the new version (the control plane's time).
    switched_at: Instant | None = None
    # Why a slot was consumed without a token (`release_rolled_back`, `held`,
    # `release_halted`).
    skip_reason: str | None = None
    # For `release_halted`: what stopped the release, `halt` (resumed to undo) or `brake` (its
    # own brake, released to undo); None when not known (runs recorded before it was kept).
    stopped_by: StoppedBy | str | None = None
    # True when no report came and the reconcile ended the claim after its window.
    outcome_inferred: bool = False
    # How the build came as the agent reported it (`patch`, `full`; None: it did not say), and
    # why a patch its release offered was not used.
    delivery: Literal["patch", "full"] | None = None
    patch_fallback_reason: PatchFallbackReason | str | None = None
    created_at: Instant
    claimed_at: Instant | None
    finished_at: Instant | None


@dataclass(frozen=True, kw_only=True)
class Operation(RunView):
    """A run in the panel's task tray: one a person started."""

    operation: str
    agent_name: str
    requested_by: UUID | None


def _run_fields(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": row["id"],
        "agent_id": row["agent_id"],
        "trigger": row["trigger"],
        "slot_key": row["slot_key"],
        "slot_at": row["slot_at"],
        "status": row["status"],
        "from_version": row["from_version"],
        "release_version": row["release_version"],
        "version": row["version"],
        "error": row["error"],
        "miss_reason": stored_code(MissReason, row["miss_reason"]),
        "reason": stored_code(OutcomeReason, row["outcome_reason"]),
        "switched_at": row["switched_at"],
        "skip_reason": row["skip_reason"],
        "stopped_by": row["stopped_by"],
        "outcome_inferred": row["outcome_inferred"],
        "delivery": row["delivery"],
        "patch_fallback_reason": stored_code(PatchFallbackReason, row["patch_fallback_reason"]),
        "created_at": row["created_at"],
        "claimed_at": row["claimed_at"],
        "finished_at": row["finished_at"],
    }


def run_view(row: dict[str, Any]) -> RunView:
    return RunView(**_run_fields(row))


def operation_view(row: dict[str, Any]) -> Operation:
    return Operation(
        **_run_fields(row),
        operation="update",
        agent_name=row["agent_name"],
        requested_by=row["requested_by"],
    )


def read_run(conn: Connection, run_id: UUID) -> dict[str, Any]:
    row: dict[str, Any] | None = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM runs r LEFT JOIN releases rel ON rel.id = r.release_id"  # noqa: S608 - constant columns
        " WHERE r.id = %s",
        [run_id],
    ).fetchone()
    assert row is not None
    return row


def latest_runs(conn: Connection, agent_id: UUID, limit: int) -> tuple[RunView, ...]:
    rows = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM runs r LEFT JOIN releases rel ON rel.id = r.release_id"  # noqa: S608 - constant columns
        " WHERE r.agent_id = %s ORDER BY r.created_at DESC, r.id LIMIT %s",
        [agent_id, limit],
    ).fetchall()
    return tuple(run_view(row) for row in rows)


def latest_run_per_agent(conn: Connection, org_id: UUID) -> dict[UUID, RunView]:
    """Each agent of the organisation's newest run (agents without a run are absent), in one
    query rather than one per agent."""
    # Per agent, its newest run through the index on (agent_id, created_at DESC): a DISTINCT ON
    # over the organisation's runs read every run it ever had.
    rows = conn.execute(
        f"SELECT {RUN_COLUMNS} FROM agents a"  # noqa: S608 - constant columns
        " CROSS JOIN LATERAL (SELECT * FROM runs r WHERE r.agent_id = a.id"
        "                      ORDER BY r.created_at DESC, r.id LIMIT 1) r"
        " LEFT JOIN releases rel ON rel.id = r.release_id"
        " WHERE a.org_id = %s",
        [org_id],
    ).fetchall()
    return {row["agent_id"]: run_view(row) for row in rows}
