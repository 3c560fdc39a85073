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
and the config poll ask it for one agent; the views of many agents (an organisation's list, the
rollout's counts, the forecast) ask it for all of theirs at once (`offers_of`): the same rule,
read in a few set-based queries whatever the number of agents.

An offered release that is halted or under its own brake is still the offer — the agent keeps
following it — but it is not granted (`RefusalCode.RELEASE_HALTED`: a
scheduled slot is skipped, a manual update refused) until a person resumes it, unless an
operator forced that one update (`rollout.gate`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from psycopg.rows import tuple_row

from control_plane.rollout.waves import Wave, effective_wave, first_wave, read_plan
from control_plane.types import Connection
from ground.contract import ReleaseTrack

__all__ = [
    "CANARY_BUCKETS",
    "Offer",
    "OfferAsk",
    "OfferBasis",
    "Offers",
    "canary_bucket",
    "in_canary_share",
    "offered_release",
    "offers_of",
    "running_version",
    "running_versions",
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

# The pairs' current releases, of the pairs asked about (`unnest` of the channels, platforms).
_CURRENT = f"""
SELECT {_COLUMNS}
  FROM current_releases cur JOIN releases rel ON rel.id = cur.release_id {_HALT}
 WHERE (cur.channel, cur.platform) IN (SELECT * FROM unnest(%s::text[], %s::text[]))
"""  # noqa: S608 - constant columns

# Per (pair, version) asked about: its newest release that is not withdrawn.
_PINNED = f"""
SELECT DISTINCT ON (rel.channel, rel.platform, rel.agent_version) {_COLUMNS}
  FROM releases rel {_HALT}
 WHERE rel.withdrawn_at IS NULL
   AND (rel.channel, rel.platform, rel.agent_version)
       IN (SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))
 ORDER BY rel.channel, rel.platform, rel.agent_version, rel.manifest_version DESC
"""  # noqa: S608 - constant columns

# Per pair asked about: the newest older release than `below` that is not withdrawn, one that
# reached `everyone` first.
_PREVIOUS = f"""
SELECT DISTINCT ON (rel.channel, rel.platform) {_COLUMNS}
  FROM unnest(%s::text[], %s::text[], %s::bigint[]) AS pair(channel, platform, below)
  JOIN releases rel ON rel.channel = pair.channel AND rel.platform = pair.platform
       AND rel.manifest_version < pair.below
  {_HALT}
 WHERE rel.withdrawn_at IS NULL
 ORDER BY rel.channel, rel.platform, (rel.stage = 'everyone') DESC, rel.manifest_version DESC
"""  # noqa: S608 - constant columns

# An agent's pin wins over its organisation's.
_PINS = """
SELECT agent_id, org_id, version FROM pins
 WHERE agent_id = ANY(%s::uuid[]) OR org_id = ANY(%s::uuid[])
"""

_MARKS = """
SELECT agent_id AS id, 'agent' AS scope FROM canary_agents WHERE agent_id = ANY(%s::uuid[])
UNION ALL
SELECT org_id, 'org' FROM canary_orgs WHERE org_id = ANY(%s::uuid[])
"""

# The version each agent last reported: its latest run that names one.
_RUNNING = """
SELECT asked.id AS agent_id, latest.version
  FROM unnest(%s::uuid[]) AS asked(id)
  CROSS JOIN LATERAL (
        SELECT version FROM runs
         WHERE agent_id = asked.id AND version IS NOT NULL
         ORDER BY created_at DESC LIMIT 1) AS latest
"""

Pair = tuple[str, str]


@dataclass(frozen=True, kw_only=True)
class OfferAsk:
    """One agent whose offer is asked: its organisation and the pair it follows."""

    agent_id: UUID
    org_id: UUID
    track: ReleaseTrack

    @property
    def pair(self) -> Pair:
        return (self.track.channel, self.track.platform)


@dataclass(frozen=True, kw_only=True)
class Offers:
    """The offers of a set of agents, and what they were computed from, for the views that show
    more of each agent (its running version, its canary marks, its wave). `running`, `marked`
    and `plan` are complete only when asked for (`offers_of(…, complete=True)`)."""

    offers: dict[UUID, Offer]
    # The pairs' current releases (of the pairs asked about).
    current: dict[Pair, dict[str, Any]]
    plan: tuple[Wave, ...]
    running: dict[UUID, str]
    marked_agents: frozenset[UUID]
    marked_orgs: frozenset[UUID]
    # Each agent's `canary_bucket` for its pair's current release, where it was needed.
    buckets: dict[UUID, int]

    def is_marked(self, ask: OfferAsk) -> bool:
        return ask.agent_id in self.marked_agents or ask.org_id in self.marked_orgs

    def wave_of(self, ask: OfferAsk) -> int | None:
        """The first wave of the pair's current release that reaches the agent (None: the pair
        has no current release)."""
        current = self.current.get(ask.pair)
        if current is None:
            return None
        bucket = self.buckets.get(ask.agent_id)
        return first_wave(
            self.plan,
            marked=self.is_marked(ask),
            bucket=canary_bucket(ask.agent_id, current["id"]) if bucket is None else bucket,
            buckets=CANARY_BUCKETS,
        )


_NO_PIN = object()


def _pin_of(ask: OfferAsk, by_agent: dict[UUID, str | None], by_org: dict[UUID, str | None]) -> Any:
    """The agent's pinned version (None: hold at what it runs), else `_NO_PIN`."""
    if ask.agent_id in by_agent:
        return by_agent[ask.agent_id]
    return by_org.get(ask.org_id, _NO_PIN)


def running_versions(conn: Connection, agent_ids: Iterable[UUID]) -> dict[UUID, str]:
    """The version each agent last reported; an agent that reported none is absent."""
    ids = list(dict.fromkeys(agent_ids))
    if not ids:
        return {}
    with conn.cursor(row_factory=tuple_row) as cursor:
        return {agent_id: str(version) for agent_id, version in cursor.execute(_RUNNING, [ids])}


def running_version(conn: Connection, agent_id: UUID) -> str | None:
    """The version the agent last reported (its latest run that names one)."""
    return running_versions(conn, [agent_id]).get(agent_id)


def _marks(conn: Connection, asks: Sequence[OfferAsk]) -> tuple[frozenset[UUID], frozenset[UUID]]:
    """The agents and the organisations of `asks` marked as canaries by an operator."""
    if not asks:
        return frozenset(), frozenset()
    rows = conn.execute(
        _MARKS, [list({a.agent_id for a in asks}), list({a.org_id for a in asks})]
    ).fetchall()
    agents = frozenset(row["id"] for row in rows if row["scope"] == "agent")
    orgs = frozenset(row["id"] for row in rows if row["scope"] == "org")
    return agents, orgs


def _pinned_releases(
    conn: Connection, wanted: set[tuple[str, str, str]]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per (channel, platform, version) of `wanted`: its newest release not withdrawn."""
    if not wanted:
        return {}
    channels, platforms, versions = (list(column) for column in zip(*wanted, strict=True))
    rows = conn.execute(_PINNED, [channels, platforms, versions]).fetchall()
    return {(r["channel"], r["platform"], r["agent_version"]): r for r in rows}


def _previous_releases(
    conn: Connection, current: dict[Pair, dict[str, Any]], wanted: set[Pair]
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
        ],
    ).fetchall()
    return {(r["channel"], r["platform"]): r for r in rows}


def offers_of(conn: Connection, asks: Sequence[OfferAsk], *, complete: bool = False) -> Offers:
    """The release each agent of `asks` is offered (see the module's docstring), in a few
    queries whatever their number. `complete`: read every agent's running version and canary
    marks and the plan too, which the views show, not only those the offers need."""
    agent_ids = list({a.agent_id for a in asks})
    org_ids = list({a.org_id for a in asks})
    pin_rows = conn.execute(_PINS, [agent_ids, org_ids]).fetchall() if asks else []
    pins_by_agent = {r["agent_id"]: r["version"] for r in pin_rows if r["agent_id"] is not None}
    pins_by_org = {r["org_id"]: r["version"] for r in pin_rows if r["org_id"] is not None}
    pins = {a.agent_id: _pin_of(a, pins_by_agent, pins_by_org) for a in asks}

    running = running_versions(
        conn, agent_ids if complete else [a for a, pin in pins.items() if pin is None]
    )
    pairs = sorted({a.pair for a in asks})
    current: dict[Pair, dict[str, Any]] = {}
    if pairs:
        rows = conn.execute(_CURRENT, [[c for c, _ in pairs], [p for _, p in pairs]]).fetchall()
        current = {(r["channel"], r["platform"]): r for r in rows}

    # The waves matter for the agents of a pair whose current release is in its canary stage.
    in_canary = [
        a
        for a in asks
        if pins[a.agent_id] is _NO_PIN
        and a.pair in current
        and current[a.pair]["stage"] != "everyone"
    ]
    plan = read_plan(conn) if complete or in_canary else ()
    marked_agents, marked_orgs = _marks(conn, asks if complete else in_canary)
    buckets = {
        ask.agent_id: canary_bucket(ask.agent_id, current[ask.pair]["id"])
        for ask in (asks if complete else in_canary)
        if ask.pair in current
    }
    reached = {
        pair: effective_wave(row["stage"], row["wave"], len(plan))
        for pair, row in current.items()
        if plan
    }

    # The decision, agent by agent; the releases it names are read below, all at once.
    basis: dict[UUID, OfferBasis | None] = {}
    pinned_version: dict[UUID, str] = {}
    for ask in asks:
        pin = pins[ask.agent_id]
        if pin is not _NO_PIN:
            basis[ask.agent_id] = "pinned"
            version = pin or running.get(ask.agent_id)
            if version is not None:
                pinned_version[ask.agent_id] = version
            continue
        release = current.get(ask.pair)
        if release is None:
            basis[ask.agent_id] = None
        elif release["stage"] == "everyone":
            basis[ask.agent_id] = "current"
        else:
            agent_wave = first_wave(
                plan,
                marked=ask.agent_id in marked_agents or ask.org_id in marked_orgs,
                bucket=buckets[ask.agent_id],
                buckets=CANARY_BUCKETS,
            )
            basis[ask.agent_id] = "canary" if agent_wave <= reached[ask.pair] else "previous"

    pinned = _pinned_releases(
        conn, {(*a.pair, pinned_version[a.agent_id]) for a in asks if a.agent_id in pinned_version}
    )
    previous = _previous_releases(
        conn, current, {a.pair for a in asks if basis[a.agent_id] == "previous"}
    )
    offers: dict[UUID, Offer] = {}
    for ask in asks:
        chosen = basis[ask.agent_id]
        offered: dict[str, Any] | None = None
        if chosen == "pinned":
            version = pinned_version.get(ask.agent_id)
            offered = None if version is None else pinned.get((*ask.pair, version))
        elif chosen == "previous":
            offered = previous.get(ask.pair)
        elif chosen is not None:
            offered = current[ask.pair]
        offers[ask.agent_id] = Offer(release=offered, basis=chosen)
    return Offers(
        offers=offers,
        current=current,
        plan=plan,
        running=running,
        marked_agents=marked_agents,
        marked_orgs=marked_orgs,
        buckets=buckets,
    )


def offered_release(
    conn: Connection, *, agent_id: UUID, org_id: UUID, track: ReleaseTrack
) -> Offer:
    """The release this agent is offered on `track` (see the module's docstring)."""
    return offers_of(conn, [OfferAsk(agent_id=agent_id, org_id=org_id, track=track)]).offers[
        agent_id
    ]
