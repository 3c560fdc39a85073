"""The claim facts of every agent due at a slot, read in one statement for the answers' memory
(`answers_cache.warm_up` decides when; this says what, beside the hot statement it mirrors).

- the same columns as `services._HOT_PATH`, for each valid agent credential (not revoked, the
  agent's audience), without the round's counters (those are never remembered with a row) and
  only for agents with no run for the slot (a run's token turns with the clock) and no hold in
  force (one that ends turns with the clock too: such an agent's claim reads its own);
- with the release each agent is offered on the pair it follows (`claims.offered`, a few
  set-based reads for all of them), kept under that pair: a claim on another pair reads its own;
- at most `limit` rows.
"""

from __future__ import annotations

from collections.abc import Hashable
from datetime import datetime
from uuid import UUID

from control_plane.claims.decision import ClaimFacts
from control_plane.claims.offered import offered_releases
from control_plane.types import Connection
from ground.contract import ReleaseTrack

__all__ = ["due_facts", "facts_key"]

# Driven from the credentials, each agent found by its primary key (`OFFSET 0` keeps the
# planner from flattening the lookup into a join it may plan as a nested loop of scans: on a
# database whose statistics are not gathered yet, 4,000 agents took 0.9 s instead of 0.02 s).
_WARM = """
SELECT c.secret_sha256, a.*,
       s.timezone, s.catch_up_minutes, s.grant_margin_seconds, s.org_cap, s.global_cap,
       b.engaged AS brake_engaged, b.reason AS brake_reason
  FROM credentials c
 CROSS JOIN LATERAL (
        SELECT a.id AS agent_id, a.org_id,
               a.update_schedule_enabled AS enabled, a.update_schedule_times AS times,
               a.created_at AS enrolled_at,
               (SELECT max(r.slot_at) FROM runs r
                 WHERE r.agent_id = a.id AND r.trigger = 'schedule') AS last_consumed_at
          FROM agents a
         WHERE a.id = c.agent_id
           AND a.update_schedule_enabled AND a.update_schedule_times ? %(wall)s
           AND NOT EXISTS (SELECT 1 FROM runs r
                            WHERE r.agent_id = a.id AND r.trigger = 'schedule'
                              AND r.slot_key = %(slot_key)s)
           AND NOT EXISTS (SELECT 1 FROM holds h
                            WHERE h.agent_id = a.id AND h.until > %(now)s)
        OFFSET 0
       ) a
 CROSS JOIN platform_settings s
 CROSS JOIN platform_brake b
 WHERE c.audience = 'agent' AND c.revoked_at IS NULL
 LIMIT %(limit)s
"""
# The hot statement's columns that a warmed row has no value for: no run, no hold in force.
_NO_RUN = {
    "existing_run_id": None,
    "existing_status": None,
    "existing_token_usable": None,
    "hold_until": None,
    "hold_reason": None,
    "hold_set_by": None,
}


# The offered release depends on the pair a claim names, so the facts are kept per credential,
# slot and pair.
def facts_key(secret_sha256: str, slot_key: str, track: ReleaseTrack) -> tuple[str, ...]:
    return ("claim", secret_sha256, slot_key, track.channel, track.platform)


def due_facts(
    conn: Connection, slot_key: str, at: datetime, limit: int
) -> list[tuple[Hashable, object, UUID, UUID]]:
    """(key, facts, agent, organisation) of every agent due at `slot_key`'s wall time, as its
    own claim at `at` would read them."""
    rows = conn.execute(
        _WARM, {"wall": slot_key[11:16], "slot_key": slot_key, "limit": limit, "now": at}
    ).fetchall()
    offered = offered_releases(
        conn, list(dict.fromkeys((row["agent_id"], row["org_id"]) for row in rows))
    )
    facts: list[tuple[Hashable, object, UUID, UUID]] = []
    for row in rows:
        track, release = offered[row["agent_id"]]
        agent = ClaimFacts.of_row({**row, **_NO_RUN}, offered=release)
        key = facts_key(row["secret_sha256"], slot_key, track)
        facts.append((key, agent, agent.agent_id, agent.org_id))
    return facts
