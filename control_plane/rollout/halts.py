"""Halting a release — by the control plane on errors, or by an operator — and resuming it.

A halt refuses every claim of the release (`RefusalCode.RELEASE_HALTED`, as the brake does), revokes
its outstanding tokens (`revoked_reason` `halted`) and stays until a person resumes it with a
reason. An automatic halt keeps its evidence — the failed and rolled-back runs that tripped it —
in `release_halt_runs`, and leaves exactly one notice in the operators' inbox (`operator_notices`,
one per halt: the database refuses a second). The evidence is read back per run with its agent,
organisation, versions, outcome and reason (`HaltRun`); the notice names the first
`NOTICE_AGENTS_SHOWN` agents and counts the rest, so one message stays readable when a whole
fleet fails.

The threshold is the one of the wave the release is in (`rollout_waves`, else
`rollout_settings`): at least `halt_failures` failed + rolled-back runs of the release finished
within the last `halt_window_minutes` (and after its last resume), and they are at least
`halt_rate_percent` of its finished runs in that time. Both, so one failure among the
first three canaries does not halt a release, and fifty failures among ten thousand successes do
not either. An update the control plane itself stopped (its token revoked by the brake, a halt or
a withdrawal) is not counted at all: it says nothing of the build.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from psycopg.types.json import Jsonb

from control_plane.errors import Conflict
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import required_text
from control_plane.releases.release_actions import (
    release_facts,
    release_row,
    revoke_release_tokens,
)
from control_plane.types import Connection
from ground.contract import NOT_THE_BUILDS_FAILURE, Instant, format_instant

__all__ = [
    "AUTOMATIC",
    "MAX_HALT_REASON_LENGTH",
    "NOTICE_AGENTS_SHOWN",
    "HaltCause",
    "HaltRun",
    "HaltView",
    "OperatorNotice",
    "halt_on_errors",
    "halt_release",
    "halts_of",
    "resume_release",
]

MAX_HALT_REASON_LENGTH = 500

# The actor of what the control plane does by itself.
AUTOMATIC = Actor(kind="control_plane", name="rollout")

HaltCause = Literal["errors", "operator"]

# How many tripping runs a halt's notice names (the rest are counted: "and N more"); the halt's
# own evidence lists them all.
NOTICE_AGENTS_SHOWN = 10


@dataclass(frozen=True, kw_only=True)
class HaltRun:
    """One run that tripped a halt: whose it was, from and to which version, how it ended."""

    run_id: UUID
    agent_id: UUID
    agent_name: str
    org_id: UUID
    org_name: str
    from_version: str | None
    to_version: str
    # `failed` or `rolled_back`, as it stood when the halt was made.
    status: str
    # Why it ended so (`ground.contract.OutcomeReason`), when the agent or the worker said.
    reason: str | None
    error: str | None
    finished_at: Instant | None


@dataclass(frozen=True, kw_only=True)
class HaltView:
    id: UUID
    release_id: UUID
    halted_at: Instant
    cause: HaltCause
    reason: str
    halted_by: str
    failures: int | None
    finished: int | None
    # The evidence of an automatic halt: the runs that tripped it, as ids and in detail.
    runs: tuple[UUID, ...]
    evidence: tuple[HaltRun, ...] = ()
    resumed_at: Instant | None
    resumed_by: str | None
    resume_reason: str | None
    revoked_tokens: int = 0


@dataclass(frozen=True, kw_only=True)
class OperatorNotice:
    id: UUID
    kind: str
    created_at: Instant
    body: dict[str, Any]
    read_at: Instant | None


def _release_for_update(conn: Connection, release_id: UUID) -> dict[str, Any]:
    return release_row(
        conn,
        release_id,
        "id, agent_version, manifest_version, channel, platform, withdrawn_at",
        for_update=True,
    )


def halt_release(
    conn: Connection,
    release_id: UUID,
    *,
    cause: HaltCause,
    reason: object,
    actor: Actor,
    now: datetime,
    evidence: tuple[tuple[UUID, str], ...] = (),
    failures: int | None = None,
    finished: int | None = None,
) -> HaltView:
    """Halt the release inside the caller's transaction (see the module's docstring)."""
    reason_text = required_text(
        "reason", reason, MAX_HALT_REASON_LENGTH, required_to="halt a release (say why)"
    )
    release = _release_for_update(conn, release_id)
    if release["withdrawn_at"] is not None:
        # Claims of it are refused and its tokens revoked already: a halt would change nothing
        # but the trail, and say "until it is resumed" of a release a resume does not bring back.
        raise Conflict(
            f"release {release_id} ({release['agent_version']}) is withdrawn: no host is offered"
            " it, so there is nothing to halt",
            code="release_withdrawn",
        )
    if conn.execute(
        "SELECT 1 FROM release_halts WHERE release_id = %s AND resumed_at IS NULL", [release_id]
    ).fetchone():
        raise Conflict(
            f"release {release_id} ({release['agent_version']}) is already halted",
            code="release_halted",
        )
    halt = conn.execute(
        "INSERT INTO release_halts (release_id, halted_at, cause, reason, halted_by, failures,"
        " finished) VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
        [release_id, now, cause, reason_text, actor.name or actor.kind, failures, finished],
    ).fetchone()
    assert halt is not None
    halt_id: UUID = halt["id"]
    for run_id, status in evidence:
        conn.execute(
            "INSERT INTO release_halt_runs (halt_id, run_id, status) VALUES (%s, %s, %s)",
            [halt_id, run_id, status],
        )
    revoked = revoke_release_tokens(conn, release_id, because="halted", now=now)
    facts = {
        **release_facts(release_id, release),
        "manifest_version": release["manifest_version"],
        "cause": cause,
        "reason": reason_text,
        "failures": failures,
        "finished": finished,
        "runs": [str(run_id) for run_id, _ in evidence],
        "revoked_tokens": revoked,
    }
    view = halts_of(conn, release_id, halt_id=halt_id)[0]
    if cause == "errors":
        # The operators are told once per halt; a person resumes it.
        conn.execute(
            "INSERT INTO operator_notices (kind, halt_id, created_at, body)"
            " VALUES ('release.halted', %s, %s, %s) ON CONFLICT (halt_id) DO NOTHING",
            [halt_id, now, Jsonb({**facts, "halt_id": str(halt_id), **notice_agents(view)})],
        )
    record_action(conn, kind="release.halted", actor=actor, at=now, data=facts)
    return HaltView(**{**view.__dict__, "revoked_tokens": revoked})


def notice_agents(halt: HaltView) -> dict[str, Any]:
    """The agents a halt's notice names — the first `NOTICE_AGENTS_SHOWN` tripping runs, each
    with its organisation, versions, outcome and reason — and how many more there are."""
    shown = halt.evidence[:NOTICE_AGENTS_SHOWN]
    return {
        "agents": [
            {
                "run_id": str(run.run_id),
                "agent_id": str(run.agent_id),
                "agent_name": run.agent_name,
                "org_id": str(run.org_id),
                "org_name": run.org_name,
                "from_version": run.from_version,
                "to_version": run.to_version,
                "status": run.status,
                "reason": run.reason,
            }
            for run in shown
        ],
        "more_agents": len(halt.evidence) - len(shown),
    }


def resume_release(
    conn: Connection, release_id: UUID, *, reason: object, actor: Actor, now: datetime
) -> HaltView:
    """A person ends the release's halt (reason required); claims of it are granted again."""
    reason_text = required_text(
        "reason", reason, MAX_HALT_REASON_LENGTH, required_to="resume a halted release (say why)"
    )
    release = _release_for_update(conn, release_id)
    row = conn.execute(
        "UPDATE release_halts SET resumed_at = %s, resumed_by = %s, resume_reason = %s"
        " WHERE release_id = %s AND resumed_at IS NULL RETURNING id",
        [now, actor.name or actor.kind, reason_text, release_id],
    ).fetchone()
    if row is None:
        raise Conflict(
            f"release {release_id} ({release['agent_version']}) is not halted",
            code="release_not_halted",
        )
    record_action(
        conn,
        kind="release.resumed",
        actor=actor,
        at=now,
        data={**release_facts(release_id, release), "reason": reason_text},
    )
    return halts_of(conn, release_id, halt_id=row["id"])[0]


def halts_of(conn: Connection, release_id: UUID, *, halt_id: UUID | None = None) -> list[HaltView]:
    """The release's halts, newest first, each with its evidence."""
    rows = conn.execute(
        "SELECT h.*, coalesce(array_agg(e.run_id ORDER BY e.run_id)"
        "   FILTER (WHERE e.run_id IS NOT NULL), '{}') AS runs"
        " FROM release_halts h LEFT JOIN release_halt_runs e ON e.halt_id = h.id"
        " WHERE h.release_id = %s AND (%s::uuid IS NULL OR h.id = %s::uuid)"
        " GROUP BY h.id ORDER BY h.halted_at DESC, h.id",
        [release_id, halt_id, halt_id],
    ).fetchall()
    evidence = _evidence_of(conn, [row["id"] for row in rows if row["runs"]])
    return [
        HaltView(
            id=row["id"],
            release_id=row["release_id"],
            halted_at=row["halted_at"],
            cause=row["cause"],
            reason=row["reason"],
            halted_by=row["halted_by"],
            failures=row["failures"],
            finished=row["finished"],
            runs=tuple(row["runs"]),
            evidence=evidence.get(row["id"], ()),
            resumed_at=row["resumed_at"],
            resumed_by=row["resumed_by"],
            resume_reason=row["resume_reason"],
        )
        for row in rows
    ]


# One row per tripping run of the given halts, by the primary keys of the runs, agents,
# organisations and releases it names.
_EVIDENCE = """
SELECT e.halt_id, e.run_id, r.agent_id, a.name AS agent_name, r.org_id, o.name AS org_name,
       r.from_version, rel.agent_version AS to_version, e.status, r.outcome_reason AS reason,
       r.error, r.finished_at
  FROM release_halt_runs e
  JOIN runs r ON r.id = e.run_id
  JOIN agents a ON a.id = r.agent_id
  JOIN orgs o ON o.id = r.org_id
  JOIN release_halts h ON h.id = e.halt_id
  JOIN releases rel ON rel.id = h.release_id
 WHERE e.halt_id = ANY(%s)
 ORDER BY r.finished_at NULLS LAST, o.name, a.name, e.run_id
"""


def _evidence_of(conn: Connection, halt_ids: list[UUID]) -> dict[UUID, tuple[HaltRun, ...]]:
    if not halt_ids:
        return {}
    found: dict[UUID, list[HaltRun]] = {}
    for row in conn.execute(_EVIDENCE, [halt_ids]).fetchall():
        halt_id = row.pop("halt_id")
        found.setdefault(halt_id, []).append(HaltRun(**row))
    return {halt_id: tuple(runs) for halt_id, runs in found.items()}


# Per release that is not halted nor withdrawn: its runs finished in the window (after its last
# resume), the failures among them, and those failures' ids.
_OVER_THRESHOLD = """
WITH s AS (SELECT * FROM rollout_settings),
plan AS (SELECT count(*)::integer AS waves FROM rollout_waves),
candidates AS (
    SELECT rel.id,
           greatest(%(now)s - make_interval(mins => s.halt_window_minutes),
                    coalesce((SELECT max(h.resumed_at) FROM release_halts h
                               WHERE h.release_id = rel.id), '-infinity')) AS since,
           coalesce(w.halt_failures, s.halt_failures) AS halt_failures,
           coalesce(w.halt_rate_percent, s.halt_rate_percent) AS halt_rate_percent
      FROM releases rel CROSS JOIN s CROSS JOIN plan
      -- The wave it is in: the last at `everyone`, else its own but never the last.
      JOIN rollout_waves w ON w.position = CASE WHEN rel.stage = 'everyone' THEN plan.waves
                                  ELSE greatest(1, least(rel.wave, plan.waves - 1)) END
     WHERE rel.withdrawn_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM release_halts h
                        WHERE h.release_id = rel.id AND h.resumed_at IS NULL)
)
SELECT c.id,
       count(*) FILTER (WHERE r.status IN ('failed', 'rolled_back')) AS failures,
       count(*) AS finished,
       array_agg(r.id ORDER BY r.finished_at, r.id)
           FILTER (WHERE r.status IN ('failed', 'rolled_back')) AS failed_runs,
       array_agg(r.status ORDER BY r.finished_at, r.id)
           FILTER (WHERE r.status IN ('failed', 'rolled_back')) AS failed_statuses,
       min(c.halt_failures) AS halt_failures, min(c.halt_rate_percent) AS halt_rate_percent
  FROM candidates c
  JOIN runs r ON r.release_id = c.id AND r.finished_at > c.since AND r.finished_at <= %(now)s
             AND r.status IN ('succeeded', 'failed', 'rolled_back')
             -- A failed update the control plane stopped, or could not serve, before its switch
             -- says nothing of the build; one that switched and rolled back does, whatever
             -- reason its report names.
             AND NOT (r.status = 'failed'
                      AND coalesce(r.outcome_reason, '') = ANY(%(not_the_builds)s))
 GROUP BY c.id
HAVING count(*) FILTER (WHERE r.status IN ('failed', 'rolled_back')) >= min(c.halt_failures)
   AND 100 * count(*) FILTER (WHERE r.status IN ('failed', 'rolled_back'))
       >= min(c.halt_rate_percent) * count(*)
"""


def halt_on_errors(conn: Connection, now: datetime) -> list[HaltView]:
    """Halt every release whose failures passed the threshold (inside the caller's
    transaction); the halts made."""
    made = []
    for row in conn.execute(
        _OVER_THRESHOLD,
        {"now": now, "not_the_builds": sorted(r.value for r in NOT_THE_BUILDS_FAILURE)},
    ).fetchall():
        evidence = tuple(zip(row["failed_runs"], row["failed_statuses"], strict=True))
        try:
            halt = halt_release(
                conn,
                row["id"],
                cause="errors",
                reason=(
                    f"{row['failures']} of {row['finished']} finished runs failed or rolled back"
                    f" (threshold: {row['halt_failures']} and {row['halt_rate_percent']}%)"
                    f" by {format_instant(now)}"
                ),
                actor=AUTOMATIC,
                now=now,
                evidence=evidence,
                failures=row["failures"],
                finished=row["finished"],
            )
        except Conflict:
            continue  # halted or withdrawn by an operator since the query: nothing to halt
        made.append(halt)
    return made
