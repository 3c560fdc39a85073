"""Which release an agent is offered, and whether it may be claimed now.

The order, first match wins:

    pinned      the agent's pin, else its organisation's: the newest release of the agent's pair
                with the pinned version (a pin without a version holds the agent at the version
                it runs); none such → nothing is offered
    current     the pair's current release once it is at the `everyone` stage
    canary      the current release in its `canary` stage, for an agent one of the waves reached so
                far reaches (`control_plane.rollout.waves`): marked as a canary (itself or its
                organisation) when such a wave takes the canaries, or in the share of one
                (`canary_bucket`, stable per agent and release)
    previous    everyone else during the canary stage: the pair's newest older release that is not
                withdrawn (one that reached `everyone` before one that did not)

Every path that picks a release for an agent asks this: the scheduled claim, the manual update
and the config poll. An offered release that is halted or under its own brake is still the offer
— the agent keeps following it — but it is not granted (`RefusalCode.RELEASE_HALTED`: a
scheduled slot is skipped, a manual update refused) until a person resumes it, unless an
operator forced that one update (`rollout.gate`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from control_plane.rollout.waves import effective_wave, first_wave, read_plan
from control_plane.types import Connection
from ground.contract import ReleaseTrack

__all__ = [
    "CANARY_BUCKETS",
    "Offer",
    "OfferBasis",
    "canary_bucket",
    "in_canary_share",
    "is_marked_canary",
    "offered_release",
    "running_version",
]

OfferBasis = Literal["pinned", "current", "canary", "previous"]

# A share is judged in basis points: 10,000 buckets, a percent is 100 of them.
CANARY_BUCKETS = 10_000


def canary_bucket(agent_id: UUID, release_id: UUID) -> int:
    """The agent's bucket for this release, 0…9999: a hash of both ids, so each release picks a
    different, evenly spread share of every organisation, and the same one every time asked."""
    digest = hashlib.sha256(f"{agent_id}:{release_id}".encode("ascii")).digest()
    return int.from_bytes(digest[:8], "big") % CANARY_BUCKETS


def in_canary_share(agent_id: UUID, release_id: UUID, share_percent: int) -> bool:
    return canary_bucket(agent_id, release_id) < share_percent * (CANARY_BUCKETS // 100)


@dataclass(frozen=True, kw_only=True)
class Offer:
    # The release row (id, agent_version, manifest_version, channel, platform, stage, halted,
    # halt_reason, braked, brake_reason), or None: nothing is offered.
    release: dict[str, Any] | None
    basis: OfferBasis | None

    @property
    def stopped_reason(self) -> str | None:
        """Why a claim of the offered release is refused now (a halt or its brake), else None."""
        if self.release is None:
            return None
        if self.release["halted"]:
            return f"halted: {self.release['halt_reason']}"
        if self.release["braked"]:
            return f"under its brake: {self.release['brake_reason']}"
        return None


_COLUMNS = """rel.id, rel.agent_version, rel.manifest_version, rel.channel, rel.platform,
       rel.stage, rel.wave, rel.published_at, halt.reason AS halt_reason,
       (halt.id IS NOT NULL) AS halted,
       rel.brake_reason, (rel.braked_at IS NOT NULL) AS braked"""
_HALT = "LEFT JOIN release_halts halt ON halt.release_id = rel.id AND halt.resumed_at IS NULL"

_CURRENT = f"""
SELECT {_COLUMNS}
  FROM current_releases cur JOIN releases rel ON rel.id = cur.release_id {_HALT}
 WHERE cur.channel = %(channel)s AND cur.platform = %(platform)s
"""  # noqa: S608 - constant columns

_PINNED = f"""
SELECT {_COLUMNS}
  FROM releases rel {_HALT}
 WHERE rel.channel = %(channel)s AND rel.platform = %(platform)s AND rel.withdrawn_at IS NULL
   AND rel.agent_version = %(version)s
 ORDER BY rel.manifest_version DESC LIMIT 1
"""  # noqa: S608 - constant columns

_PREVIOUS = f"""
SELECT {_COLUMNS}
  FROM releases rel {_HALT}
 WHERE rel.channel = %(channel)s AND rel.platform = %(platform)s AND rel.withdrawn_at IS NULL
   AND rel.manifest_version < %(below)s
 ORDER BY (rel.stage = 'everyone') DESC, rel.manifest_version DESC LIMIT 1
"""  # noqa: S608 - constant columns

_PIN = """
SELECT version FROM pins WHERE agent_id = %(agent_id)s OR org_id = %(org_id)s
 ORDER BY (agent_id IS NOT NULL) DESC LIMIT 1
"""

_IS_MARKED = """
SELECT EXISTS (SELECT 1 FROM canary_agents WHERE agent_id = %(agent_id)s)
       OR EXISTS (SELECT 1 FROM canary_orgs WHERE org_id = %(org_id)s) AS marked
"""


def is_marked_canary(conn: Connection, agent_id: UUID, org_id: UUID) -> bool:
    """Marked as a canary by an operator: the agent itself, or its organisation."""
    row = conn.execute(_IS_MARKED, {"agent_id": agent_id, "org_id": org_id}).fetchone()
    assert row is not None
    return bool(row["marked"])


def running_version(conn: Connection, agent_id: UUID) -> str | None:
    """The version the agent last reported (its latest run that names one)."""
    row = conn.execute(
        "SELECT version FROM runs WHERE agent_id = %s AND version IS NOT NULL"
        " ORDER BY created_at DESC LIMIT 1",
        [agent_id],
    ).fetchone()
    return None if row is None else str(row["version"])


def offered_release(
    conn: Connection, *, agent_id: UUID, org_id: UUID, track: ReleaseTrack
) -> Offer:
    """The release this agent is offered on `track` (see the module's docstring)."""
    pair = {"channel": track.channel, "platform": track.platform}
    pin = conn.execute(_PIN, {"agent_id": agent_id, "org_id": org_id}).fetchone()
    if pin is not None:
        version = pin["version"] or running_version(conn, agent_id)
        if version is None:
            return Offer(release=None, basis="pinned")
        pinned: dict[str, Any] | None = conn.execute(
            _PINNED, {**pair, "version": version}
        ).fetchone()
        return Offer(release=pinned, basis="pinned")
    current: dict[str, Any] | None = conn.execute(_CURRENT, pair).fetchone()
    if current is None:
        return Offer(release=None, basis=None)
    if current["stage"] == "everyone":
        return Offer(release=current, basis="current")
    plan = read_plan(conn)
    reached = effective_wave(current["stage"], current["wave"], len(plan))
    agent_wave = first_wave(
        plan,
        marked=is_marked_canary(conn, agent_id, org_id),
        bucket=canary_bucket(agent_id, current["id"]),
        buckets=CANARY_BUCKETS,
    )
    if agent_wave <= reached:
        return Offer(release=current, basis="canary")
    previous: dict[str, Any] | None = conn.execute(
        _PREVIOUS, {**pair, "below": current["manifest_version"]}
    ).fetchone()
    return Offer(release=previous, basis="previous")
