"""Which release an agent is offered, and whether it may be claimed now.

The order, first match wins:

    pinned      the agent's pin, else its organisation's: the newest release of the agent's pair
                with the pinned version (a pin without a version holds the agent at the version
                it runs); none such → nothing is offered
    current     the pair's current release once it is at the `everyone` stage
    canary      the current release in its `canary` stage, for an agent one of the waves reached so
                far reaches (`control_plane.rollout.waves`): marked as a canary (itself or its
                organisation) when such a wave takes the canaries, or in the share of one
                (`canary_bucket`, stable per agent and release; a build signed again keeps
                its first signing's, `WAVES_OF`)
    previous    everyone else during the canary stage: the pair's newest older release that is not
                withdrawn (one that reached `everyone` before one that did not)

Every path that picks a release for an agent asks this: the scheduled claim, the manual update
and the config poll ask it for one agent; the views of many agents (an organisation's list, the
rollout's counts, the forecast) read its answers kept per agent (`control_plane.rollout.
kept_offers`, which asks it for the agents a write made stale): the same rule (`offers_from`),
read in a few set-based queries whatever the number of agents — one for the agents' own facts
(`AgentFacts`: pair, pin, canary marks, hold, running version), a few for the releases.

Nachtwacht's own agent, the updater, is a product line of its own
(`control_plane.releases.products`): its offer follows the same rule over the updater's releases,
less the pins (a pin names a version of the managed agent).

An offered release that is halted or under its own brake is still the offer — the agent keeps
following it — but it is not granted (`RefusalCode.RELEASE_HALTED`: a
scheduled slot is skipped, a manual update refused) until a person resumes it, unless an
operator forced that one update (`rollout.gate`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from psycopg.rows import tuple_row

from control_plane.pins.holds import ActiveHold
from control_plane.releases.products import CURRENT_TABLE, Product
from control_plane.rollout.waves import Wave, effective_wave, first_wave, read_plan
from control_plane.types import Connection
from ground.contract import DEFAULT_TRACK, ReleaseTrack

__all__ = [
    "CANARY_BUCKETS",
    "OFFER_COLUMNS",
    "OFFER_HALT",
    "WAVES_OF",
    "AgentFacts",
    "Offer",
    "OfferBasis",
    "Offers",
    "canary_bucket",
    "in_canary_share",
    "offered_release",
    "offers_from",
    "previous_releases",
    "read_facts_of",
    "read_fleet_facts",
    "read_org_facts",
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
    # halt_reason, halt_cause, braked, brake_reason), or None: nothing is offered.
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


OFFER_COLUMNS = """rel.id, rel.agent_version, rel.manifest_version, rel.channel, rel.platform,
       rel.product, rel.stage, rel.wave, rel.published_at, halt.reason AS halt_reason,
       (halt.id IS NOT NULL) AS halted, halt.cause AS halt_cause,
       rel.brake_reason, (rel.braked_at IS NOT NULL) AS braked"""
OFFER_HALT = "LEFT JOIN release_halts halt ON halt.release_id = rel.id AND halt.resumed_at IS NULL"

# The release whose id places an agent in the waves of `rel`: the pair's first release of the same
# build (version and artifact). A build signed again keeps the agents its waves reached
# (`control_plane.releases.signed_again`); any other release is its own first.
WAVES_OF = """(SELECT first.id FROM releases first
   WHERE first.product = rel.product AND first.channel = rel.channel
     AND first.platform = rel.platform AND first.agent_version = rel.agent_version
     AND first.sha256 = rel.sha256
   ORDER BY first.manifest_version LIMIT 1) AS waves_of"""

# The pairs' current releases, of the pairs asked about (`unnest` of the channels, platforms).
_CURRENT = {
    product: f"""
SELECT {OFFER_COLUMNS}, {WAVES_OF}
  FROM {table} cur JOIN releases rel ON rel.id = cur.release_id {OFFER_HALT}
 WHERE (cur.channel, cur.platform) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""  # noqa: S608 - constant columns
    for product, table in CURRENT_TABLE.items()
}

# Per (pair, version) asked about: its newest release that is not withdrawn.
_PINNED = f"""
SELECT DISTINCT ON (rel.channel, rel.platform, rel.agent_version) {OFFER_COLUMNS}
  FROM releases rel {OFFER_HALT}
 WHERE rel.withdrawn_at IS NULL AND rel.product = 'agent'
   AND (rel.channel, rel.platform, rel.agent_version)
       IN (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))
 ORDER BY rel.channel, rel.platform, rel.agent_version, rel.manifest_version DESC
"""  # noqa: S608 - constant columns

# Per pair asked about: the newest older release than `below` that is not withdrawn, one that
# reached `everyone` first.
_PREVIOUS = f"""
SELECT DISTINCT ON (rel.channel, rel.platform) {OFFER_COLUMNS}
  FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS pair(channel, platform, below)
  JOIN releases rel ON rel.channel = pair.channel AND rel.platform = pair.platform
       AND rel.manifest_version < pair.below
  {OFFER_HALT}
 WHERE rel.withdrawn_at IS NULL AND rel.product = %s
 ORDER BY rel.channel, rel.platform, (rel.stage = 'everyone') DESC, rel.manifest_version DESC
"""  # noqa: S608 - constant columns

# Each agent of a selection with what its offer depends on: the pair it last asked on, its pin
# (its own wins over its organisation's), its canary marks, its hold and what it runs
# (`agents.current_version`: the version its newest report named; a late report of an older run
# does not move it, see `control_plane.runs.current_version`).
_FACTS = """
SELECT a.id AS agent_id, a.org_id, t.channel, t.platform,
       (ap.id IS NOT NULL OR op.id IS NOT NULL) AS pinned,
       CASE WHEN ap.id IS NOT NULL THEN ap.version ELSE op.version END AS pin_version,
       (ca.agent_id IS NOT NULL) AS marked, (co.org_id IS NOT NULL) AS org_marked,
       h.until AS hold_until, h.reason AS hold_reason, h.set_by AS hold_set_by,
       ag.current_version AS running
  FROM ({selection}) AS a
  LEFT JOIN agents ag ON ag.id = a.id
  LEFT JOIN agent_tracks t ON t.agent_id = a.id
  LEFT JOIN pins ap ON ap.agent_id = a.id
  LEFT JOIN pins op ON op.org_id = a.org_id
  LEFT JOIN canary_agents ca ON ca.agent_id = a.id
  LEFT JOIN canary_orgs co ON co.org_id = a.org_id
  LEFT JOIN holds h ON h.agent_id = a.id
"""
# The selections: agents named with their organisation (a page, one agent), an organisation's
# live agents, every live agent. The last two are chosen in SQL, not sent as long id lists.
_GIVEN = "SELECT * FROM unnest(%(ids)s::uuid[], %(orgs)s::uuid[]) AS given(id, org_id)"
_OF_ORG = "SELECT id, org_id FROM agents WHERE org_id = %(org)s AND deleted_at IS NULL"
_LIVE = "SELECT id, org_id FROM agents WHERE deleted_at IS NULL"

Pair = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class AgentFacts:
    """One agent's part of what its offer is computed from."""

    agent_id: UUID
    org_id: UUID
    # The pair it last asked on (None: it has not asked yet).
    seen: ReleaseTrack | None
    pinned: bool
    # With `pinned`: the version, or None (hold at what it runs).
    pin_version: str | None
    # Marked a canary by an operator: itself, its organisation.
    marked: bool
    org_marked: bool
    # Its hold as stored (in force while its `until` is after now), else None.
    hold: ActiveHold | None
    running: str | None

    @property
    def track(self) -> ReleaseTrack:
        """The pair it follows: the one it last asked on, else the default pair."""
        return DEFAULT_TRACK if self.seen is None else self.seen


def _read_facts(conn: Connection, selection: str, params: dict[str, Any]) -> list[AgentFacts]:
    query = _FACTS.format(selection=selection)
    # The pairs are few: one track per pair, shared by its agents.
    tracks: dict[Pair, ReleaseTrack] = {}
    facts = []
    with conn.cursor(row_factory=tuple_row) as cursor:
        for row in cursor.execute(query, params).fetchall():
            agent_id, org_id, channel, platform, *rest = row
            seen = None
            if channel is not None:
                seen = tracks.get((channel, platform)) or tracks.setdefault(
                    (channel, platform), ReleaseTrack(channel=channel, platform=platform)
                )
            pinned, pin_version, marked, org_marked, until, reason, set_by, running = rest
            facts.append(
                AgentFacts(
                    agent_id=agent_id,
                    org_id=org_id,
                    seen=seen,
                    pinned=pinned,
                    pin_version=pin_version,
                    marked=marked,
                    org_marked=org_marked,
                    hold=(
                        None
                        if until is None
                        else ActiveHold(until=until, reason=reason, set_by=set_by)
                    ),
                    running=running,
                )
            )
    return facts


def read_facts_of(conn: Connection, agents: Sequence[tuple[UUID, UUID]]) -> list[AgentFacts]:
    """The facts of each (agent id, organisation id) given, in the order given."""
    if not agents:
        return []
    ids = [agent_id for agent_id, _ in agents]
    by_id = {
        f.agent_id: f
        for f in _read_facts(conn, _GIVEN, {"ids": ids, "orgs": [org for _, org in agents]})
    }
    return [by_id[agent_id] for agent_id in ids]


def read_org_facts(conn: Connection, org_id: UUID) -> list[AgentFacts]:
    """The facts of every live agent of the organisation."""
    return _read_facts(conn, _OF_ORG, {"org": org_id})


def read_fleet_facts(conn: Connection) -> list[AgentFacts]:
    """The facts of every live agent."""
    return _read_facts(conn, _LIVE, {})


@dataclass(frozen=True, kw_only=True)
class Offers:
    """The offers of a set of agents, and what the views show beside them (each agent's wave)."""

    offers: dict[UUID, Offer]
    # The pairs' current releases (of the pairs asked about), and the plan of waves.
    current: dict[Pair, dict[str, Any]]
    plan: tuple[Wave, ...]
    # Each agent's `canary_bucket` for its pair's current release, where one was hashed.
    buckets: dict[UUID, int]

    def wave_of(self, facts: AgentFacts, track: ReleaseTrack) -> int | None:
        """The first wave of the pair's current release that reaches the agent (None: the pair
        has no current release)."""
        current = self.current.get((track.channel, track.platform))
        if current is None:
            return None
        bucket = self.buckets.get(facts.agent_id)
        return first_wave(
            self.plan,
            marked=facts.marked or facts.org_marked,
            bucket=canary_bucket(facts.agent_id, current["waves_of"]) if bucket is None else bucket,
            buckets=CANARY_BUCKETS,
        )


def _pinned_releases(
    conn: Connection, wanted: set[tuple[str, str, str]]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per (channel, platform, version) of `wanted`: its newest release not withdrawn."""
    if not wanted:
        return {}
    channels, platforms, versions = (list(column) for column in zip(*wanted, strict=True))
    rows = conn.execute(_PINNED, [channels, platforms, versions]).fetchall()
    return {(r["channel"], r["platform"], r["agent_version"]): r for r in rows}


def previous_releases(
    conn: Connection, current: dict[Pair, dict[str, Any]], wanted: set[Pair], product: Product
) -> dict[Pair, dict[str, Any]]:
    """Per pair of `wanted`: the release before its current one (see the module's docstring)."""
    if not wanted:
        return {}
    pairs = sorted(wanted)
    rows = conn.execute(
        _PREVIOUS,
        [
            [channel for channel, _ in pairs],
            [platform for _, platform in pairs],
            [current[pair]["manifest_version"] for pair in pairs],
            product,
        ],
    ).fetchall()
    return {(r["channel"], r["platform"]): r for r in rows}


def offers_from(
    conn: Connection,
    facts: Sequence[AgentFacts],
    *,
    tracks: Mapping[UUID, ReleaseTrack] | None = None,
    with_plan: bool = False,
    product: Product = "agent",
) -> Offers:
    """The release each agent is offered (see the module's docstring), on the pair of `tracks`
    (the one a request names), else the one it follows; the releases read in a few queries
    whatever the number of agents. `with_plan`: read the plan of waves even when no offer needs
    it (the views show each agent's wave). `product`: the managed agent's releases, or those of
    nachtwacht's own agent (pins do not apply to it)."""
    pair_of = {
        f.agent_id: (
            (f.track.channel, f.track.platform)
            if tracks is None or f.agent_id not in tracks
            else (tracks[f.agent_id].channel, tracks[f.agent_id].platform)
        )
        for f in facts
    }
    pairs = sorted(set(pair_of.values()))
    current: dict[Pair, dict[str, Any]] = {}
    if pairs:
        rows = conn.execute(
            _CURRENT[product], [[c for c, _ in pairs], [p for _, p in pairs]]
        ).fetchall()
        current = {(r["channel"], r["platform"]): r for r in rows}
    # The waves matter for an agent not pinned on a pair whose current release is a canary.
    in_canary = [
        f
        for f in facts
        if not (f.pinned and product == "agent")
        and pair_of[f.agent_id] in current
        and current[pair_of[f.agent_id]]["stage"] != "everyone"
    ]
    plan = read_plan(conn) if with_plan or in_canary else ()
    reached = {
        pair: effective_wave(row["stage"], row["wave"], len(plan))
        for pair, row in current.items()
        if plan
    }
    buckets: dict[UUID, int] = {}

    # The decision, agent by agent; the releases it names are read below, all at once.
    basis: dict[UUID, OfferBasis | None] = {}
    pinned_version: dict[UUID, str] = {}
    for f in facts:
        pair = pair_of[f.agent_id]
        release = current.get(pair)
        if f.pinned and product == "agent":
            basis[f.agent_id] = "pinned"
            version = f.pin_version or f.running
            if version is not None:
                pinned_version[f.agent_id] = version
        elif release is None:
            basis[f.agent_id] = None
        elif release["stage"] == "everyone":
            basis[f.agent_id] = "current"
        else:
            bucket = buckets[f.agent_id] = canary_bucket(f.agent_id, release["waves_of"])
            agent_wave = first_wave(
                plan, marked=f.marked or f.org_marked, bucket=bucket, buckets=CANARY_BUCKETS
            )
            basis[f.agent_id] = "canary" if agent_wave <= reached[pair] else "previous"

    pinned = _pinned_releases(
        conn, {(*pair_of[a], version) for a, version in pinned_version.items()}
    )
    previous = previous_releases(
        conn,
        current,
        {pair_of[a] for a, chosen in basis.items() if chosen == "previous"},
        product,
    )
    offers: dict[UUID, Offer] = {}
    for f in facts:
        chosen = basis[f.agent_id]
        pair = pair_of[f.agent_id]
        offered: dict[str, Any] | None = None
        if chosen == "pinned":
            version = pinned_version.get(f.agent_id)
            offered = None if version is None else pinned.get((*pair, version))
        elif chosen == "previous":
            offered = previous.get(pair)
        elif chosen is not None:
            offered = current[pair]
        offers[f.agent_id] = Offer(release=offered, basis=chosen)
    return Offers(offers=offers, current=current, plan=plan, buckets=buckets)


def offered_release(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    track: ReleaseTrack,
    product: Product = "agent",
) -> Offer:
    """The release of `product` this agent is offered on `track` (see the module's
    docstring)."""
    facts = read_facts_of(conn, [(agent_id, org_id)])
    return offers_from(conn, facts, tracks={agent_id: track}, product=product).offers[agent_id]
