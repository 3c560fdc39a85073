"""A release's wave and stage, the canary group, and the rollout settings.

A release published onto a pair that already has a release starts in the plan's first wave, at
the `canary` stage (the column's default) — unless it is the pair's current build signed again,
which goes on in that build's wave (`control_plane.releases.signed_again`); the first release
of a pair starts at `everyone` — no agent on the pair runs anything the control plane offered, so
there is no fleet to protect from it. The operator may publish straight to `everyone` (recorded
with the publication).

The two stages older clients know map onto the waves (`control_plane.rollout.waves`): `canary`
is every wave before the last, `everyone` the last. Publishing with `stage: canary` starts in
wave 1, with `stage: everyone` in the last; a promotion by hand without a wave goes straight to
everyone, as it did when there were two stages; with a wave it goes to that wave.

Promotion to the next wave is automatic (`promote_soaked`, a step of the reconcile pass) once the
release is not halted, one of its runs succeeded after its current wave began (and after its
last resume, if it was halted), and the wave's soak has passed since that first success; an
operator may promote by hand at any time. A wave that reaches no agent of the pair beyond the
earlier waves (a small fleet, where 5 % or 10 % is nobody, or agents all pinned) has no run to
wait for: its soak counts from when it began, so such a wave never stops the rollout.

The rollout settings' `canary_share_percent` is the first wave's share (reading and changing it
reads and changes the plan).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from control_plane.agent_scope import org_of_agent, require_org
from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.releases.release_actions import release_facts, release_row
from control_plane.rollout.halts import AUTOMATIC
from control_plane.rollout.offer import CANARY_BUCKETS, WAVES_OF, canary_bucket
from control_plane.rollout.waves import (
    Wave,
    effective_wave,
    first_wave,
    newcomers_refusal,
    parse_plan,
    read_plan,
    write_plan,
)
from control_plane.seeded_rows import seeded_row
from control_plane.types import Connection

__all__ = [
    "SETTING_BOUNDS",
    "RolloutSettings",
    "Stage",
    "StageChange",
    "mark_canary",
    "mark_canary_org",
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
    # The first wave's share.
    canary_share_percent: int
    # Each wave's soak and threshold unless the wave sets its own.
    soak_minutes: int
    halt_failures: int
    halt_rate_percent: int
    halt_window_minutes: int
    waves: tuple[Wave, ...] = ()


@dataclass(frozen=True, kw_only=True)
class StageChange:
    release_id: UUID
    version: str
    channel: str
    platform: str
    stage: Stage
    # The wave it is in now, of `waves` (the last is everyone).
    wave: int
    waves: int
    changed_at: datetime
    # The person's reason; None when the control plane promoted it after the soak.
    reason: str | None = None


def read_rollout_settings(conn: Connection) -> RolloutSettings:
    row = seeded_row(
        conn,
        "SELECT soak_minutes, halt_failures, halt_rate_percent, halt_window_minutes"
        " FROM rollout_settings",
    )
    plan = read_plan(conn)
    return RolloutSettings(**row, canary_share_percent=plan[0].share_percent, waves=plan)


def _event_value(value: object) -> object:
    if isinstance(value, tuple):
        return [vars(wave) for wave in value]
    return value


def update_rollout_settings(
    conn: Connection, changes: dict[str, Any], *, actor: Actor, now: datetime
) -> RolloutSettings:
    """Change some settings (each bounded; a bad one is a 422 naming it). `waves` replaces the
    plan; `canary_share_percent` changes its first wave's share."""
    columns: dict[str, int] = {}
    plan = None
    for name, value in changes.items():
        if name == "waves":
            plan = parse_plan(value)
            continue
        if name not in SETTING_BOUNDS:
            raise InvalidInput(name, value, "is not a rollout setting")
        low, high = SETTING_BOUNDS[name]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidInput(name, value, f"is not a whole number from {low} to {high}")
        columns[name] = value
    before = read_rollout_settings(conn)
    if plan is not None:
        write_plan(conn, plan)
    share = columns.pop("canary_share_percent", None)
    first = (plan or before.waves)[0]
    if share == 0 and not first.canaries and len(plan or before.waves) > 1:
        raise InvalidInput("canary_share_percent", share, "would make the first wave reach nobody")
    waves = plan or before.waves
    if share is not None and len(waves) > 2:
        second = waves[1]
        refusal = newcomers_refusal((replace(first, share_percent=share), second))
        if refusal is not None:
            raise InvalidInput(
                "canary_share_percent",
                share,
                f"is not below wave 2's share ({second.share_percent} %): the shares are"
                " cumulative, so wave 2 would reach no agent wave 1 does not (widen the later"
                " waves with `waves` first)",
            )
    if share is not None:
        conn.execute("UPDATE rollout_waves SET share_percent = %s WHERE position = 1", [share])
    if columns or plan is not None or share is not None:
        assignments = "".join(f"{name} = %({name})s, " for name in columns)
        conn.execute(
            # Only names checked against SETTING_BOUNDS above reach the statement.
            f"UPDATE rollout_settings SET {assignments}changed_at = %(now)s",  # noqa: S608
            {**columns, "now": now},
        )
    after = read_rollout_settings(conn)
    record_action(
        conn,
        kind="rollout.settings_changed",
        actor=actor,
        at=now,
        data={
            "before": {name: _event_value(getattr(before, name)) for name in changes},
            "after": {name: _event_value(getattr(after, name)) for name in changes},
        },
    )
    return after


def mark_canary(
    conn: Connection, agent_id: UUID, *, canary: bool, actor: Actor, now: datetime
) -> bool:
    """Mark (or unmark) an agent as a canary for every release of its pair; its new state."""
    org_id = org_of_agent(conn, agent_id)
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
        org_id=org_id,
        agent_id=agent_id,
    )
    return canary


def mark_canary_org(
    conn: Connection, org_id: UUID, *, canary: bool, actor: Actor, now: datetime
) -> bool:
    """Mark (or unmark) an organisation as a canary: each of its agents is in every wave that
    takes the canaries, for every release of its pair; its new state."""
    require_org(conn, org_id)
    if canary:
        conn.execute(
            "INSERT INTO canary_orgs (org_id, marked_at, marked_by) VALUES (%s, %s, %s)"
            " ON CONFLICT (org_id) DO NOTHING",
            [org_id, now, actor.name or actor.kind],
        )
    else:
        conn.execute("DELETE FROM canary_orgs WHERE org_id = %s", [org_id])
    record_action(
        conn,
        kind="canary.marked" if canary else "canary.unmarked",
        actor=actor,
        at=now,
        org_id=org_id,
        data={"scope": "organisation"},
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
    to_wave: int | None = None,
) -> StageChange:
    """Move a canary release on (inside the caller's transaction): to `to_wave`, else after a
    soak to the next wave, else (a person's promotion naming no wave) to everyone. A person's
    promotion carries their reason (the service requires one); the soak's carries none."""
    row = release_row(
        conn,
        release_id,
        "id, agent_version, channel, platform, stage, wave, withdrawn_at,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = releases.id"
        "   AND h.resumed_at IS NULL) AS halted",
        for_update=True,
    )
    waves = len(read_plan(conn))
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
    current = effective_wave(row["stage"], row["wave"], waves)
    if to_wave is None:
        target = current + 1 if soaked else waves
    elif isinstance(to_wave, bool) or not current < to_wave <= waves:
        raise InvalidInput(
            "wave",
            to_wave,
            f"is not a later wave: the release is in wave {current} of {waves}"
            f" (expected {current + 1} to {waves})",
        )
    else:
        target = to_wave
    target = min(target, waves)
    stage: Stage = "everyone" if target == waves else "canary"
    conn.execute(
        "UPDATE releases SET stage = %s, wave = %s, stage_changed_at = %s WHERE id = %s",
        [stage, target, now, release_id],
    )
    record_action(
        conn,
        kind="release.promoted",
        actor=actor,
        at=now,
        data={
            **release_facts(release_id, row),
            "stage": stage,
            "wave": target,
            "waves": waves,
            "after_soak": soaked,
            "reason": reason,
        },
    )
    return StageChange(
        release_id=release_id,
        version=row["agent_version"],
        channel=row["channel"],
        platform=row["platform"],
        stage=stage,
        wave=target,
        waves=waves,
        changed_at=now,
        reason=reason,
    )


# A canary release's current wave is its own position, but never the plan's last. `since` is when
# the wave began (or the release's last resume, if later); `soaked_at` when the wave's soak ends,
# counted from its first success since then (NULL: none yet).
_CANARIES = f"""
WITH plan AS (SELECT count(*)::integer AS waves FROM rollout_waves),
candidate AS (
SELECT rel.id, rel.channel, rel.platform, rel.wave, rel.product, rel.agent_version, rel.sha256,
       {WAVES_OF},
       greatest(coalesce(rel.stage_changed_at, rel.published_at),
                coalesce((SELECT max(h.resumed_at) FROM release_halts h
                           WHERE h.release_id = rel.id), '-infinity')) AS since,
       make_interval(mins => coalesce(w.soak_minutes, s.soak_minutes)) AS soak,
       rel.published_at
  FROM releases rel
  -- The managed agent's current releases and those of nachtwacht's own agent move alike.
  JOIN (SELECT release_id FROM current_releases
        UNION ALL SELECT release_id FROM current_updater_releases) cur
    ON cur.release_id = rel.id
 CROSS JOIN rollout_settings s
 CROSS JOIN plan
  JOIN rollout_waves w ON w.position = greatest(1, least(rel.wave, plan.waves - 1))
 WHERE rel.stage = 'canary' AND rel.withdrawn_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM release_halts h
                    WHERE h.release_id = rel.id AND h.resumed_at IS NULL))
SELECT c.id, c.channel, c.platform, c.wave, c.since, c.soak,
       c.waves_of,
       -- The build's successes since the wave began, whichever signing of it ran: a build
       -- signed again goes on with its wave (`control_plane.releases.signed_again`).
       (SELECT min(r.finished_at) FROM runs r
         WHERE r.release_id IN (SELECT same.id FROM releases same
                                 WHERE same.product = c.product AND same.channel = c.channel
                                   AND same.platform = c.platform
                                   AND same.agent_version = c.agent_version
                                   AND same.sha256 = c.sha256)
           AND r.status = 'succeeded' AND r.finished_at > c.since)
       + c.soak AS soaked_at
  FROM candidate c
 WHERE c.since + c.soak <= %(now)s
 ORDER BY c.published_at, c.id
"""  # noqa: S608 - constant columns

# The live agents that claim on the pair, whether an operator marked them (or their organisation)
# as canaries, and whether a pin (their own or their organisation's) takes them out of the waves.
_PAIR_AGENTS = """
SELECT a.id,
       (EXISTS (SELECT 1 FROM canary_agents ca WHERE ca.agent_id = a.id)
        OR EXISTS (SELECT 1 FROM canary_orgs co WHERE co.org_id = a.org_id)) AS marked
  FROM agent_tracks t JOIN agents a ON a.id = t.agent_id
 WHERE t.channel = %(channel)s AND t.platform = %(platform)s AND a.deleted_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM pins p WHERE p.agent_id = a.id OR p.org_id = a.org_id)
"""


def _wave_reaches_someone_new(
    conn: Connection, release: dict[str, Any], plan: tuple[Wave, ...]
) -> bool:
    """Whether the release's current wave reaches an agent of its pair that no earlier wave did
    (a pinned agent takes no wave: its pin decides)."""
    wave = effective_wave("canary", release["wave"], len(plan))
    agents = conn.execute(
        _PAIR_AGENTS, {"channel": release["channel"], "platform": release["platform"]}
    ).fetchall()
    return any(
        first_wave(
            plan,
            marked=agent["marked"],
            bucket=canary_bucket(agent["id"], release["waves_of"]),
            buckets=CANARY_BUCKETS,
        )
        == wave
        for agent in agents
    )


def promote_soaked(conn: Connection, now: datetime) -> list[StageChange]:
    """Move every current canary release whose current wave has been good for its soak time to
    the next wave (inside the caller's transaction; run after the halt check of the same pass).
    A wave with a success soaks from its first one; a wave that reaches nobody new from when it
    began (see the module's docstring)."""
    plan = read_plan(conn)
    soaked = [
        row
        for row in conn.execute(_CANARIES, {"now": now}).fetchall()
        if (row["soaked_at"] is not None and row["soaked_at"] <= now)
        or (row["soaked_at"] is None and not _wave_reaches_someone_new(conn, row, plan))
    ]
    return [
        promote_release(conn, row["id"], actor=AUTOMATIC, now=now, soaked=True) for row in soaked
    ]
