"""The agent's config with its own offer and hold, for the few agents that need one.

The config poll is the hottest statement there is, so it only asks whether the agent is pinned,
held, or its pair's current release is in the canary stage; only then is this called, and the
config shows what the claim would grant (`rollout.offer`) and the hold (`AgentConfig.hold`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from control_plane.pins.holds import active_hold
from control_plane.rollout.offer import offered_release
from control_plane.types import Connection
from ground.contract import ReleaseTrack

__all__ = [
    "PERSONAL_OFFER_COLUMNS",
    "TRACK_CTE",
    "UPDATER_OFFER_COLUMNS",
    "UPDATER_OFFER_JOIN",
    "needs_personal_offer",
    "with_personal_offer",
    "with_updater_offer",
]

# Appended to the config statement's CTEs (`{agent}` is its agent expression): the pair the agent
# polls for, written only when it changed, so the panel's API and the forecast per stage know
# every agent's pair, also of agents that never claim.
TRACK_CTE = """, track AS (
    INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)
    SELECT {agent}, %(channel)s, %(platform)s, %(now)s
     WHERE EXISTS (SELECT 1 FROM agents a WHERE a.id = {agent})
       AND NOT EXISTS (
           SELECT 1 FROM agent_tracks t
            WHERE t.agent_id = {agent} AND t.channel = %(channel)s
              AND t.platform = %(platform)s)
    ON CONFLICT (agent_id) DO UPDATE SET channel = EXCLUDED.channel,
        platform = EXCLUDED.platform, seen_at = EXCLUDED.seen_at
)"""

# Added to the config statement's SELECT (the agent is `a`, the pair's current release `rel`).
PERSONAL_OFFER_COLUMNS = """rel.stage AS release_stage,
       EXISTS (SELECT 1 FROM pins p WHERE p.agent_id = a.id OR p.org_id = a.org_id) AS pinned,
       EXISTS (SELECT 1 FROM holds h WHERE h.agent_id = a.id AND h.until > %(now)s) AS held"""


# The updater's current release of the pair (nachtwacht's own agent, `releases.products`): joined
# and selected by the config statement, so an agent is offered it in the same round trip unless
# that release is in its canary stage.
UPDATER_OFFER_JOIN = """
  LEFT JOIN current_updater_releases ucur
         ON ucur.channel = %(channel)s AND ucur.platform = %(platform)s
  LEFT JOIN releases urel ON urel.id = ucur.release_id"""
# An updater release this agent rolled back (since its last retry) is not offered to it again:
# its claim would be refused `release_rolled_back`, which consumes the slot, every night, and the
# managed agent would never get a slot again.
UPDATER_OFFER_COLUMNS = """urel.agent_version AS updater_version_offered,
       urel.manifest_version AS updater_manifest_version, urel.stage AS updater_stage,
       (urel.id IS NOT NULL AND EXISTS (
            SELECT 1 FROM runs ur
             WHERE ur.agent_id = a.id AND ur.release_id = urel.id AND ur.status = 'rolled_back'
               AND (a.release_retry_at IS NULL OR ur.finished_at > a.release_retry_at)))
       AS updater_rolled_back"""


def with_updater_offer(
    conn: Connection, row: dict[str, Any], track: ReleaseTrack
) -> dict[str, Any]:
    """The config row with the updater release this agent is offered in place of the pair's
    current one: the same rule of stages and waves as the managed agent's, without pins; none
    when the agent rolled that release back."""
    if row["updater_rolled_back"]:
        return {**row, "updater_version_offered": None, "updater_manifest_version": None}
    if row["updater_stage"] in (None, "everyone"):
        return row
    offer = offered_release(
        conn, agent_id=row["id"], org_id=row["org_id"], track=track, product="updater"
    )
    release = offer.release or {}
    return {
        **row,
        "updater_version_offered": release.get("agent_version"),
        "updater_manifest_version": release.get("manifest_version"),
    }


def needs_personal_offer(row: dict[str, Any]) -> bool:
    return bool(row["pinned"] or row["held"] or row["release_stage"] == "canary")


def with_personal_offer(
    conn: Connection, row: dict[str, Any], track: ReleaseTrack, now: datetime
) -> dict[str, Any]:
    """The config row with the agent's offer in place of the pair's current release, and its
    hold (`hold_until`, `hold_reason`, `hold_set_by`)."""
    offer = offered_release(conn, agent_id=row["id"], org_id=row["org_id"], track=track)
    release = offer.release or {}
    hold = active_hold(conn, row["id"], now)
    return {
        **row,
        "agent_version": release.get("agent_version"),
        "manifest_version": release.get("manifest_version"),
        "channel": release.get("channel"),
        "platform": release.get("platform"),
        "hold_until": None if hold is None else hold.until,
        "hold_reason": None if hold is None else hold.reason,
        "hold_set_by": None if hold is None else hold.set_by,
    }
