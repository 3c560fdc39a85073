"""The caps: how many scheduled updates may start in one round.

Two caps, both platform settings. Per organisation per round: one customer's uplink carries
every download its agents start (forty agents at 03:00 pulling one build each over one
connection), so at most `org_cap` of them start in a round. In total per round: our own side,
because the per-organisation cap multiplies with the number of organisations, so at most
`global_cap` start in a round whoever they belong to. A round is one minute of the control
plane's clock (`round_start`), never the agent's.

The database holds both exactly, whatever number of workers and replicas race: each round has
a counter row per organisation (`claim_rounds_org`) and one for the platform
(`claim_rounds_global`). The grant's transaction increments both in one call
(`count_claim_grant`, migration 0012) with `granted < cap` in each UPDATE, under the row's lock,
the organisation's first; a full cap fails that statement with `CAP_FULL_SQLSTATE`, naming the
cap, and the grant's COMMIT becomes a rollback. So a round never grants more than its caps.

Everything else only reads the counters to refuse early (`cap_refusal`), and may read them at any
moment of the round: a counter only grows — grants add to it, nothing subtracts (a revoked or
expired token leaves it) — so a count read during a round is a lower bound for the rest of it,
and a cap found full stays full until the round ends.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime
from uuid import UUID

import psycopg
from psycopg.rows import DictRow

from control_plane.errors import ClaimRefused
from control_plane.types import Connection
from ground.contract import RefusalCode

__all__ = [
    "CAP_FULL_SQLSTATE",
    "Caps",
    "RoundCounts",
    "cap_full_refusal",
    "cap_refusal",
    "count_grant",
    "open_round_counters",
    "retry_after_seconds",
    "round_start",
]

CAP_FULL_SQLSTATE = "NW429"

# A round's two counter rows, created when missing. Only when missing: an INSERT … ON CONFLICT
# that meets a row another grant has updated waits for that grant's commit (the row might be gone
# by then), which would queue every grant of a round from here on.
_OPEN_ROUND = """
WITH org AS (
  INSERT INTO claim_rounds_org (round_start, org_id)
  SELECT %(round)s, %(org)s WHERE NOT EXISTS (
    SELECT FROM claim_rounds_org WHERE round_start = %(round)s AND org_id = %(org)s)
  ON CONFLICT DO NOTHING)
INSERT INTO claim_rounds_global (round_start)
SELECT %(round)s WHERE NOT EXISTS (SELECT FROM claim_rounds_global WHERE round_start = %(round)s)
ON CONFLICT DO NOTHING
"""
_COUNT_GRANT = (
    "SELECT org_granted, global_granted"
    " FROM count_claim_grant(%(round)s, %(org)s, %(org_cap)s, %(cap)s)"
)


@dataclass(frozen=True, kw_only=True)
class Caps:
    """The two caps in force (platform settings)."""

    org_cap: int
    global_cap: int


@dataclass(frozen=True, kw_only=True)
class RoundCounts:
    """Grants counted in one round: the organisation's and the platform's (lower bounds, when
    read before the round ended)."""

    org_granted: int = 0
    global_granted: int = 0


def round_start(now: datetime) -> datetime:
    """The round `now` falls in: one minute of the control plane's clock."""
    return now.astimezone(UTC).replace(second=0, microsecond=0)


def retry_after_seconds(now: datetime) -> int:
    """Whole seconds until the next round begins (at least 1)."""
    into_round = now.astimezone(UTC)
    remaining = 60 - into_round.second - into_round.microsecond / 1_000_000
    return max(1, math.ceil(remaining))


def _full(code: RefusalCode, now: datetime, message: str) -> ClaimRefused:
    return ClaimRefused(
        code, message, reason=code.value, retry_after_seconds=retry_after_seconds(now)
    )


def org_cap_full(now: datetime, org_cap: int) -> ClaimRefused:
    message = f"this organisation's {org_cap} updates for this minute are taken"
    return _full(RefusalCode.ORG_CAP, now, message)


def global_cap_full(now: datetime, global_cap: int) -> ClaimRefused:
    message = f"the platform's {global_cap} updates for this minute are taken"
    return _full(RefusalCode.GLOBAL_CAP, now, message)


def cap_refusal(caps: Caps, counts: RoundCounts, now: datetime) -> ClaimRefused | None:
    """The refusal of a round whose counts already reach a cap, the organisation's first; None
    while both have room."""
    if counts.org_granted >= caps.org_cap:
        return org_cap_full(now, caps.org_cap)
    if counts.global_granted >= caps.global_cap:
        return global_cap_full(now, caps.global_cap)
    return None


def cap_full_refusal(failed: psycopg.Error, caps: Caps, now: datetime) -> ClaimRefused | None:
    """The refusal a failed `count_grant` stands for (a cap found full), or None for any other
    failure."""
    if failed.sqlstate != CAP_FULL_SQLSTATE:
        return None
    if failed.diag.message_primary == RefusalCode.ORG_CAP.value:
        return org_cap_full(now, caps.org_cap)
    return global_cap_full(now, caps.global_cap)


def open_round_counters(conn: Connection, current_round: datetime, org_id: UUID) -> None:
    """Create the round's counter rows if missing (without locking them: see `count_grant`)."""
    conn.execute(_OPEN_ROUND, {"round": current_round, "org": org_id})


def count_grant(
    conn: Connection, current_round: datetime, org_id: UUID, caps: Caps
) -> psycopg.Cursor[DictRow]:
    """Count one grant in both caps, inside the grant's transaction; the cursor yields the
    counts it left (`org_granted`, `global_granted`). Fails with `CAP_FULL_SQLSTATE` when a cap
    is full. Sent last in the grant: the counter rows' locks queue a round's grants behind each
    other, so they are held only from here to the commit."""
    return conn.execute(
        _COUNT_GRANT,
        {"round": current_round, "org": org_id, "org_cap": caps.org_cap, "cap": caps.global_cap},
    )
