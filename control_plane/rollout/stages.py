"""A release's stage (canary → everyone), the canary group, and the rollout settings.

A release published onto a pair that already has a release starts in the `canary` stage (the
column's default); the first release of a pair starts at `everyone` — no agent on the pair runs
anything the control plane offered, so there is no fleet to protect from it. The operator may
publish straight to `everyone` (recorded with the publication).

Promotion is automatic (`promote_soaked`, a step of the reconcile pass) once the release is not
halted, at least one of its runs succeeded, and `soak_minutes` have passed since its first success
(since its last resume, if it was halted); an operator may promote by hand at any time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from control_plane.errors import Conflict, InvalidInput, NotFound
from control_plane.events.trail import Actor, record_action
from control_plane.releases.release_actions import release_facts, release_row
from control_plane.rollout.halts import AUTOMATIC
from control_plane.types import Connection

__all__ = [
    "SETTING_BOUNDS",
    "RolloutSettings",
    "Stage",
    "StageChange",
    "mark_canary",
    "promote_release",
    "promote_soaked",
    "read_rollout_settings",
    "update_rollout_settings",
]

Stage = Literal["canary", "everyone"]

# The database's CHECK bounds, named once for the API's validation messages.
SETTING_BOUNDS: dict[str, tuple[int, int]] = {
    "canary_share_percent": (0, 100),
    "soak_minutes": (0, 20160),
    "halt_failures": (1, 100000),
    "halt_rate_percent": (1, 100),
    "halt_window_minutes": (1, 20160),
}


@dataclass(frozen=True, kw_only=True)
class RolloutSettings:
    canary_share_percent: int
    soak_minutes: int
    halt_failures: int
    halt_rate_percent: int
    halt_window_minutes: int


@dataclass(frozen=True, kw_only=True)
class StageChange:
    release_id: UUID
    version: str
    channel: str
    platform: str
    stage: Stage
    changed_at: datetime
    # The person's reason; None when the control plane promoted it after the soak.
    reason: str | None = None


def read_rollout_settings(conn: Connection) -> RolloutSettings:
    row = conn.execute(
        "SELECT canary_share_percent, soak_minutes, halt_failures, halt_rate_percent,"
        " halt_window_minutes FROM rollout_settings"
    ).fetchone()
    assert row is not None, "migration 0010 inserts the settings row"
    return RolloutSettings(**row)


def update_rollout_settings(
    conn: Connection, changes: dict[str, Any], *, actor: Actor, now: datetime
) -> RolloutSettings:
    """Change some settings (each bounded; a bad one is a 422 naming it)."""
    for name, value in changes.items():
        if name not in SETTING_BOUNDS:
            raise InvalidInput(name, value, "is not a rollout setting")
        low, high = SETTING_BOUNDS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(name, value, f"is not a whole number from {low} to {high}")
    before = read_rollout_settings(conn)
    if changes:
        assignments = ", ".join(f"{name} = %({name})s" for name in changes)
        conn.execute(
            # Only names checked against SETTING_BOUNDS above reach the statement.
            f"UPDATE rollout_settings SET {assignments}, changed_at = %(now)s",  # noqa: S608
            {**changes, "now": now},
        )
    after = read_rollout_settings(conn)
    record_action(
        conn,
        kind="rollout.settings_changed",
        actor=actor,
        at=now,
        data={
            "before": {name: getattr(before, name) for name in changes},
            "after": {name: getattr(after, name) for name in changes},
        },
    )
    return after


def mark_canary(
    conn: Connection, agent_id: UUID, *, canary: bool, actor: Actor, now: datetime
) -> bool:
    """Mark (or unmark) an agent as a canary for every release of its pair; its new state."""
    agent = conn.execute(
        "SELECT org_id FROM agents WHERE id = %s AND deleted_at IS NULL", [agent_id]
    ).fetchone()
    if agent is None:
        raise NotFound(f"agent {agent_id} does not exist", code="agent_not_found")
    if canary:
        conn.execute(
            "INSERT INTO canary_agents (agent_id, marked_at, marked_by) VALUES (%s, %s, %s)"
            " ON CONFLICT (agent_id) DO NOTHING",
            [agent_id, now, actor.name or actor.kind],
        )
    else:
        conn.execute("DELETE FROM canary_agents WHERE agent_id = %s", [agent_id])
    record_action(
        conn,
        kind="canary.marked" if canary else "canary.unmarked",
        actor=actor,
        at=now,
        org_id=agent["org_id"],
        agent_id=agent_id,
    )
    return canary


def promote_release(
    conn: Connection,
    release_id: UUID,
    *,
    actor: Actor,
    now: datetime,
    reason: str | None = None,
    soaked: bool = False,
) -> StageChange:
    """Move a canary release to `everyone` (inside the caller's transaction). A person's
    promotion carries their reason (the service requires one); the soak's carries none."""
    row = release_row(
        conn,
        release_id,
        "id, agent_version, channel, platform, stage, withdrawn_at,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = releases.id"
        "   AND h.resumed_at IS NULL) AS halted",
        for_update=True,
    )
    if row["stage"] != "canary":
        raise Conflict(
            f"release {release_id} ({row['agent_version']}) is already at stage everyone",
            code="release_not_canary",
        )
    if row["withdrawn_at"] is not None or row["halted"]:
        raise Conflict(
            f"release {release_id} ({row['agent_version']}) is withdrawn or halted:"
            " resume it before promoting it",
            code="release_halted",
        )
    conn.execute(
        "UPDATE releases SET stage = 'everyone', stage_changed_at = %s WHERE id = %s",
        [now, release_id],
    )
    record_action(
        conn,
        kind="release.promoted",
        actor=actor,
        at=now,
        data={
            **release_facts(release_id, row),
            "stage": "everyone",
            "after_soak": soaked,
            "reason": reason,
        },
    )
    return StageChange(
        release_id=release_id,
        version=row["agent_version"],
        channel=row["channel"],
        platform=row["platform"],
        stage="everyone",
        changed_at=now,
        reason=reason,
    )


_SOAKED = """
SELECT rel.id
  FROM releases rel
  JOIN current_releases cur ON cur.release_id = rel.id
 CROSS JOIN rollout_settings s
 WHERE rel.stage = 'canary' AND rel.withdrawn_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM release_halts h
                    WHERE h.release_id = rel.id AND h.resumed_at IS NULL)
   AND (SELECT min(r.finished_at) FROM runs r
         WHERE r.release_id = rel.id AND r.status = 'succeeded'
           AND r.finished_at > coalesce((SELECT max(h.resumed_at) FROM release_halts h
                                          WHERE h.release_id = rel.id), '-infinity'))
       + make_interval(mins => s.soak_minutes) <= %(now)s
 ORDER BY rel.published_at, rel.id
"""


def promote_soaked(conn: Connection, now: datetime) -> list[StageChange]:
    """Promote every current canary release whose canaries have been good for the soak time
    (inside the caller's transaction; run after the halt check of the same pass)."""
    return [
        promote_release(conn, row["id"], actor=AUTOMATIC, now=now, soaked=True)
        for row in conn.execute(_SOAKED, {"now": now}).fetchall()
    ]
