"""What the control plane's database says about the night, and the live table drawn from it.

Read-only queries on the demo's own database (the demo holds it): the night's scheduled run rows
per organisation, and the caps' round counters (`claim_rounds_org`, `claim_rounds_global`) —
the very rows that enforce the caps, so "grants per round" is what the caps let through.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from control_plane.types import Pool
from nachtwacht.demo_night.errors import DemoFailed
from nachtwacht.demo_night.night import Night

__all__ = [
    "OrgProgress",
    "Snapshot",
    "latest_served_agent",
    "render_line",
    "render_table",
    "take_snapshot",
    "unfinished_runs",
]

COLUMNS = ("updated", "updating", "waiting", "up_to_date", "missed", "failed", "not_due")
HEADINGS = {
    "updated": "updated",
    "updating": "updating",
    "waiting": "waiting for a token",
    "up_to_date": "up to date",
    "missed": "missed",
    "failed": "failed",
    "not_due": "not due yet",
}

_RUNS = """
SELECT o.name AS org_name, a.id AS agent_id, r.status, r.created_at, r.finished_at
  FROM orgs o
  JOIN agents a ON a.org_id = o.id
  LEFT JOIN runs r ON r.agent_id = a.id AND r.trigger = 'schedule'
                  AND r.slot_at >= %(start)s AND r.slot_at < %(end)s
 ORDER BY o.created_at, o.name
"""
_GLOBAL_ROUNDS = """
SELECT round_start, granted FROM claim_rounds_global
 WHERE round_start >= %(start)s AND round_start < %(end)s ORDER BY round_start
"""
_ORG_ROUNDS = """
SELECT r.round_start, o.name AS org_name, r.granted
  FROM claim_rounds_org r JOIN orgs o ON o.id = r.org_id
 WHERE r.round_start >= %(start)s AND r.round_start < %(end)s
"""


@dataclass
class OrgProgress:
    name: str
    agents: int = 0
    counts: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    at: datetime
    orgs: list[OrgProgress]
    grants_per_round: list[tuple[datetime, int]]
    org_grants_per_round: dict[str, list[tuple[datetime, int]]]

    def total(self, column: str) -> int:
        return sum(org.counts[column] for org in self.orgs)

    @property
    def agents(self) -> int:
        return sum(org.agents for org in self.orgs)

    @property
    def settled(self) -> bool:
        """Every agent has an outcome for the night: nothing waiting, updating or not yet due."""
        return all(self.total(c) == 0 for c in ("updating", "waiting", "not_due"))

    def max_grants(self) -> int:
        return max((granted for _, granted in self.grants_per_round), default=0)

    def max_org_grants(self, org_name: str) -> int:
        rounds = self.org_grants_per_round.get(org_name, [])
        return max((granted for _, granted in rounds), default=0)


def _category(status: str | None, *, now: datetime, night: Night, catch_up: timedelta) -> str:
    if status == "succeeded":
        return "updated"
    if status == "claimed":
        return "updating"
    if status == "up_to_date":
        return "up_to_date"
    if status in {"failed", "rolled_back"}:
        return "failed"
    if status is not None:
        return "missed"  # the reconcile worker's `missed` rows
    if now < night.slot_at:
        return "not_due"
    if now < night.slot_at + catch_up:
        return "waiting"
    return "missed"


def _status_as_of(row: dict[str, Any], as_of: datetime | None) -> str | None:
    """The run's status at `as_of`, from its timestamps: not there yet, still claimed (its
    outcome came later), or as it is now."""
    status: str | None = row["status"]
    if as_of is None or status is None:
        return status
    if row["created_at"] > as_of:
        return None
    finished = row["finished_at"]
    if status != "claimed" and finished is not None and finished > as_of:
        return "claimed"
    return status


def take_snapshot(
    pool: Pool,
    night: Night,
    now: datetime,
    catch_up: timedelta,
    *,
    as_of: datetime | None = None,
) -> Snapshot:
    """The night so far. With `as_of`, every count as it stood at that instant (a minute's end),
    so one line's counts and its round's tokens belong to the same minute."""
    if as_of is not None:
        now = as_of
    window = {"start": night.start, "end": night.end}
    try:
        with pool.connection() as conn:
            rows = conn.execute(_RUNS, window).fetchall()
            global_rounds = conn.execute(_GLOBAL_ROUNDS, window).fetchall()
            org_rounds = conn.execute(_ORG_ROUNDS, window).fetchall()
    except psycopg.errors.UndefinedTable as exc:
        raise DemoFailed(
            f"this control plane has no run or cap tables yet ({exc.diag.message_primary}); "
            "the demo needs a control plane with releases, claims and runs"
        ) from exc
    orgs: dict[str, OrgProgress] = {}
    for row in rows:
        org = orgs.setdefault(row["org_name"], OrgProgress(row["org_name"]))
        org.agents += 1
        status = _status_as_of(row, as_of)
        org.counts[_category(status, now=now, night=night, catch_up=catch_up)] += 1
    per_org: dict[str, list[tuple[datetime, int]]] = {}
    for row in org_rounds:
        per_org.setdefault(row["org_name"], []).append((row["round_start"], row["granted"]))
    return Snapshot(
        at=now,
        orgs=list(orgs.values()),
        grants_per_round=[(row["round_start"], row["granted"]) for row in global_rounds],
        org_grants_per_round=per_org,
    )


def _round_grants(snapshot: Snapshot, night: Night) -> str:
    rounds = [(at, n) for at, n in snapshot.grants_per_round if n > 0]
    if not rounds:
        return "no tokens granted yet"
    shown = ", ".join(f"{night.label(at)[:5]} {n}" for at, n in rounds[-8:])
    more = "… " if len(rounds) > 8 else ""
    return f"grants per round: {more}{shown}"


def render_table(snapshot: Snapshot, night: Night, caps: tuple[int, int]) -> list[str]:
    """The live table: one row per organisation, then the grants of the latest rounds."""
    name_width = max([12, *(len(org.name) for org in snapshot.orgs)])
    columns = [c for c in COLUMNS if c != "failed" or snapshot.total("failed")]
    header = f"{'organisation':<{name_width}} {'agents':>6} " + " ".join(
        f"{HEADINGS[c]:>{max(7, len(HEADINGS[c]))}}" for c in columns
    )
    lines = [f"platform time {night.label(snapshot.at)}", header]
    for org in snapshot.orgs:
        lines.append(
            f"{org.name:<{name_width}} {org.agents:>6} "
            + " ".join(f"{org.counts[c]:>{max(7, len(HEADINGS[c]))}}" for c in columns)
        )
    org_cap, global_cap = caps
    lines.append(f"{_round_grants(snapshot, night)}  (caps: {org_cap} per org, {global_cap} total)")
    return lines


# What each count means, said once before the lines (a newcomer reads the demo's log).
LEGEND = (
    "each line is one platform minute that has just ended: every organisation's agents as they "
    "stood at its last second, and the tokens the caps granted in that minute's round",
    "  not due yet — before the 03:00 slot; waiting for a token — due, and refused by a cap or "
    "not yet asked (each daemon asks once a minute, at its own second); updating — holds a "
    "token: downloading, verifying, installing, restarting, health-checking; updated — runs the "
    "new version; up to date — already had it; missed — the 15-minute window closed without a "
    "token; failed — failed or rolled back",
)


def render_line(snapshot: Snapshot, night: Night) -> str:
    """One line per ended minute when the output is not a terminal (a log, a test): `snapshot`
    is taken as of the minute's end (`take_snapshot(as_of=)`), and the line names that minute."""
    parts = []
    for org in snapshot.orgs:
        counts = ", ".join(f"{org.counts[c]} {HEADINGS[c]}" for c in COLUMNS if org.counts[c])
        parts.append(f"{org.name}: {counts}")
    minute = snapshot.at.replace(second=0, microsecond=0)
    if minute == snapshot.at:
        minute -= timedelta(minutes=1)  # exactly at a minute's end: the minute that ended
    granted = sum(n for at, n in snapshot.grants_per_round if at == minute)
    return (
        f"{night.label(minute)} | "
        + " | ".join(parts)
        + f" | tokens granted in this minute's round: {granted}"
    )


def latest_served_agent(pool: Pool, night: Night) -> str | None:
    """The agent whose update the caps let through last: the most interesting night to show."""
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT agent_id FROM runs WHERE trigger = 'schedule' AND status = 'succeeded'"
            " AND slot_at >= %(start)s AND slot_at < %(end)s"
            " ORDER BY claimed_at DESC, agent_id LIMIT 1",
            {"start": night.start, "end": night.end},
        ).fetchone()
    return None if row is None else str(row["agent_id"])


def unfinished_runs(pool: Pool, night: Night) -> list[tuple[str, str, str | None]]:
    """(agent name, status, error) of every agent that neither updated nor was up to date."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT a.name, coalesce(r.status, 'no run') AS status, r.error FROM agents a"
            " LEFT JOIN runs r ON r.agent_id = a.id AND r.trigger = 'schedule'"
            " AND r.slot_at >= %(start)s AND r.slot_at < %(end)s"
            " WHERE coalesce(r.status, '') NOT IN ('succeeded', 'up_to_date')"
            " ORDER BY a.name",
            {"start": night.start, "end": night.end},
        ).fetchall()
    return [(row["name"], row["status"], row["error"]) for row in rows]
