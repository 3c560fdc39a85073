"""The release a scheduled claim is judged by: the agent's offer (`rollout.offer`), whether it
is stopped (halted, or under its own brake) and whether this host rolled it back.

A host that rolled release N back used to claim a token for N at every later slot and fail
again — each time one of its organisation's tokens of the minute. So a claim whose offered
release this agent has a `rolled_back` run for is refused `RELEASE_ROLLED_BACK` (the slot is
consumed by a `skipped` run with that reason, so the agent page says so). It ends by itself when
a newer release is offered, or when an operator asks for a retry (`request_retry`: rolled-back
runs finished before that moment no longer count).

Read for one agent on the claim's pair (the database path) or for every agent due at a slot on
the pair each follows (the warm-up), in the same few set-based statements either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from control_plane.claims.decision import OfferedRelease
from control_plane.releases.products import Product
from control_plane.rollout.offer import offers_from, read_facts_of
from control_plane.types import Connection
from ground.contract import ReleaseTrack

__all__ = ["offered_releases"]

# Per (agent, offered release): the agent's latest run that rolled that release back since the
# agent's last retry.
_ROLLED_BACK = """
SELECT DISTINCT ON (r.agent_id) r.agent_id, r.id AS rolled_back_run
  FROM unnest(%s::uuid[], %s::uuid[]) AS o(agent_id, release_id)
  JOIN runs r ON r.agent_id = o.agent_id AND r.release_id = o.release_id
  JOIN agents a ON a.id = r.agent_id
 WHERE r.status = 'rolled_back'
   AND (a.release_retry_at IS NULL OR r.finished_at > a.release_retry_at)
 ORDER BY r.agent_id, r.finished_at DESC
"""


def offered_releases(
    conn: Connection,
    agents: Sequence[tuple[UUID, UUID]],
    tracks: Mapping[UUID, ReleaseTrack] | None = None,
    *,
    product: Product = "agent",
) -> dict[UUID, tuple[ReleaseTrack, OfferedRelease | None]]:
    """For each (agent, organisation): the pair it is judged on (`tracks`' when given, else the
    one it follows) and the release of `product` offered on it (None: nothing is offered)."""
    if not agents:
        return {}
    facts = read_facts_of(conn, agents)
    offers = offers_from(conn, facts, tracks=tracks, product=product).offers
    pair = {
        f.agent_id: f.track if tracks is None or f.agent_id not in tracks else tracks[f.agent_id]
        for f in facts
    }
    releases = {
        agent_id: offer.release for agent_id, offer in offers.items() if offer.release is not None
    }
    rows = conn.execute(
        _ROLLED_BACK,
        [list(releases), [release["id"] for release in releases.values()]],
    ).fetchall()
    rolled_back = {row["agent_id"]: row["rolled_back_run"] for row in rows}
    offered: dict[UUID, tuple[ReleaseTrack, OfferedRelease | None]] = {}
    for agent_id, track in pair.items():
        release = releases.get(agent_id)
        offered[agent_id] = (
            track,
            None
            if release is None
            else OfferedRelease(
                release_id=release["id"],
                agent_version=release["agent_version"],
                channel=release["channel"],
                platform=release["platform"],
                stopped=offers[agent_id].stopped_reason,
                rolled_back_run=rolled_back.get(agent_id),
            ),
        )
    return offered
