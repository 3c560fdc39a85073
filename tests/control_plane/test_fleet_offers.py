"""The offer read for many agents at once is the offer of each agent read alone.

The views of many agents (an organisation's list, the rollout's counts, the forecast) read every
agent's offer in a few set-based queries; the claim, the manual update and the config poll read
one. For a varied fleet — pins per organisation and per agent (a version, and "hold at what it
runs"), holds in force and ended, canaries marked per agent and per organisation and in a wave's
share, several waves, a halted release, a braked one, a withdrawn one, four pairs (one without
any release), agents that never asked and one deleted — the answers must be the same agent by
agent: mixing agents in one read must not lend one agent another's pin, pair or release.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.rollout.offer import (
    offered_release,
    offers_from,
    read_facts_of,
    read_fleet_facts,
    read_org_facts,
)
from control_plane.rollout.services import agent_release, release_views
from control_plane.types import Pool
from ground.contract import DEFAULT_TRACK, ReleaseTrack
from tests.control_plane.conftest import sign_release
from tests.worlds.clocks import ManualClock

OPERATOR = Actor(kind="operator", name="tests")
STABLE = ReleaseTrack(channel="stable", platform="linux-x86_64")
STABLE_ARM = ReleaseTrack(channel="stable", platform="linux-aarch64")
BETA = ReleaseTrack(channel="beta", platform="linux-x86_64")
# A pair no release was published for.
BETA_ARM = ReleaseTrack(channel="beta", platform="linux-aarch64")
PAIRS = (STABLE, STABLE_ARM, BETA, BETA_ARM)
assert DEFAULT_TRACK == STABLE, "the agents that never asked follow the stable pair"


@dataclass(frozen=True, kw_only=True)
class Fleet:
    orgs: list[UUID]
    # Every agent enrolled, with its organisation (the deleted one included).
    agents: list[tuple[UUID, UUID]]
    deleted: UUID


def _publish(
    services: Services,
    key: Ed25519PrivateKey,
    now: datetime,
    track: ReleaseTrack,
    version: str,
    manifest_version: int,
    stage: str,
) -> UUID:
    signed = sign_release(
        key,
        version=version,
        manifest_version=manifest_version,
        channel=track.channel,
        platform=track.platform,
    )
    published = services.releases.publish(
        signed.manifest, signed.signature, signed.artifact, now=now, stage=stage
    )
    return published.id


def _varied_fleet(services: Services, pool: Pool, key: Ed25519PrivateKey, now: datetime) -> Fleet:
    rng = random.Random(20261204)
    services.rollout.update_settings(
        {
            "waves": [
                {"share_percent": 20, "canaries": True},
                {"share_percent": 40},
                {"share_percent": 70},
                {"share_percent": 100},
            ]
        },
        actor=OPERATOR,
        now=now,
    )
    # stable: a canary promoted to its second wave over two releases at everyone.
    _publish(services, key, now, STABLE, "1.0.0", 1, "everyone")
    _publish(services, key, now, STABLE, "1.1.0", 2, "everyone")
    wave_two = _publish(services, key, now, STABLE, "1.2.0", 3, "canary")
    services.rollout.promote(wave_two, reason="tests", actor=OPERATOR, now=now, to_wave=2)
    # stable arm: a halted canary in its first wave.
    _publish(services, key, now, STABLE_ARM, "1.0.0", 4, "everyone")
    halted = _publish(services, key, now, STABLE_ARM, "1.1.0", 5, "canary")
    services.rollout.halt(halted, reason="tests", actor=OPERATOR, now=now)
    # beta: a withdrawn release below a braked one; the canary after them previous-less.
    _publish(services, key, now, BETA, "1.1.0", 6, "everyone")
    withdrawn = _publish(services, key, now, BETA, "1.2.0", 7, "everyone")
    services.releases.withdraw(withdrawn, reason="tests", now=now)
    braked = _publish(services, key, now, BETA, "1.3.0", 8, "everyone")
    services.brake.set_release(braked, engaged=True, reason="tests", actor=OPERATOR, now=now)

    orgs = [services.accounts.create_org(f"org-{n}", now=now).org_id for n in range(6)]
    agents = []
    for n in range(150):
        org = orgs[n % len(orgs)]
        agents.append((services.accounts.enroll_agent(org, f"host-{n:03d}", now=now).agent_id, org))
    ids = [agent_id for agent_id, _ in agents]
    with pool.connection() as conn:
        for agent_id, _ in agents:
            if rng.random() < 0.85:  # the rest never asked: they follow the default pair
                track = rng.choice(PAIRS)
                conn.execute(
                    "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
                    " VALUES (%s, %s, %s, %s)",
                    [agent_id, track.channel, track.platform, now],
                )
            if rng.random() < 0.8:  # the rest reported no version yet
                conn.execute(
                    "UPDATE agents SET current_version = %s WHERE id = %s",
                    [rng.choice(["1.0.0", "1.1.0", "1.2.0", "1.3.0"]), agent_id],
                )
        for agent_id in rng.sample(ids, 15):
            conn.execute(
                "INSERT INTO canary_agents (agent_id, marked_at, marked_by) VALUES (%s, %s, 't')",
                [agent_id, now],
            )
        conn.execute(
            "INSERT INTO canary_orgs (org_id, marked_at, marked_by) VALUES (%s, %s, 't')",
            [orgs[3], now],
        )
        for agent_id in rng.sample(ids, 20):
            ends = now + timedelta(days=rng.choice([-2, 3]))  # some ended already
            conn.execute(
                "INSERT INTO holds (agent_id, until, reason, set_by, set_at)"
                " VALUES (%s, %s, 'tests', 'operator', %s)",
                [agent_id, ends, ends - timedelta(days=5)],
            )
        deleted = ids[-1]
        conn.execute("UPDATE agents SET deleted_at = %s WHERE id = %s", [now, deleted])
    services.pins.pin(org_id=orgs[1], version="1.0.0", reason="t", actor=OPERATOR, now=now)
    services.pins.pin(org_id=orgs[2], version=None, reason="t", actor=OPERATOR, now=now)
    for agent_id in rng.sample(ids[:-1], 12):
        services.pins.pin(
            agent_id=agent_id,
            version=rng.choice(["1.0.0", "1.1.0", None]),
            reason="t",
            actor=OPERATOR,
            now=now,
        )
    return Fleet(orgs=orgs, agents=agents, deleted=deleted)


@pytest.fixture
def fleet(
    services: Services, pool: Pool, release_key: Ed25519PrivateKey, clock: ManualClock
) -> Fleet:
    return _varied_fleet(services, pool, release_key, clock.now())


def test_the_fleet_is_varied(fleet: Fleet, pool: Pool, clock: ManualClock) -> None:
    """The fleet the equivalences run on reaches every basis and every kind of agent."""
    with pool.connection() as conn:
        views = release_views(conn, read_fleet_facts(conn), clock.now())
    assert {view.basis for view in views} == {"pinned", "current", "canary", "previous", None}
    assert any(view.pinned and view.offered is None for view in views)
    assert any(view.offered is not None and view.offered.halted for view in views)
    assert any(view.offered is not None and view.offered.braked for view in views)
    assert any(view.hold is not None for view in views)
    assert any(view.canary_marked for view in views)
    assert any(view.canary and not view.canary_marked for view in views)
    assert any(not view.track_seen for view in views)
    assert any(view.wave is None for view in views)
    assert len({view.wave for view in views}) > 3
    assert fleet.deleted not in {view.agent_id for view in views}


def test_the_fleets_views_are_each_agents_own(fleet: Fleet, pool: Pool, clock: ManualClock) -> None:
    now = clock.now()
    with pool.connection() as conn:
        together = release_views(conn, read_fleet_facts(conn), now)
        owners = dict(fleet.agents)
        alone = [
            agent_release(conn, view.agent_id, owners[view.agent_id], now) for view in together
        ]
    assert len(together) == len(fleet.agents) - 1
    for batched, single in zip(together, alone, strict=True):
        assert batched == single, f"agent {batched.agent_id}"


def test_an_organisations_views_are_each_agents_own(
    fleet: Fleet, services: Services, clock: ManualClock
) -> None:
    now = clock.now()
    for org in fleet.orgs:
        listed = services.rollout.org_agent_releases(org, now=now).agents
        assert [view.agent_id for view in listed] == [
            agent_id
            for agent_id, owner in fleet.agents
            if owner == org and agent_id != fleet.deleted
        ]
        for view in listed:
            assert view == services.rollout.agent_release(view.agent_id, org_id=org, now=now)


def test_a_page_of_agents_is_each_agents_own(
    fleet: Fleet, services: Services, clock: ManualClock
) -> None:
    now = clock.now()
    org = fleet.orgs[2]
    page = [agent_id for agent_id, owner in fleet.agents if owner == org][3:9]
    listed = services.rollout.org_agent_releases(org, now=now, agent_ids=page).agents
    assert {view.agent_id for view in listed} == set(page) - {fleet.deleted}
    for view in listed:
        assert view == services.rollout.agent_release(view.agent_id, org_id=org, now=now)


@pytest.mark.parametrize("track", PAIRS, ids=lambda t: f"{t.channel}_{t.platform}")
def test_the_offer_on_a_named_pair_is_each_agents_own(
    fleet: Fleet, pool: Pool, track: ReleaseTrack
) -> None:
    """What a claim or a config poll naming `track` is offered, for every agent at once and
    for each alone (the pair a request names wins over the one the agent was last seen on)."""
    with pool.connection() as conn:
        facts = read_facts_of(conn, fleet.agents)
        together = offers_from(conn, facts, tracks={a: track for a, _ in fleet.agents})
        for agent_id, org in fleet.agents:
            alone = offered_release(conn, agent_id=agent_id, org_id=org, track=track)
            assert together.offers[agent_id] == alone, f"agent {agent_id}"


def test_an_organisations_facts_are_each_agents_own(fleet: Fleet, pool: Pool) -> None:
    with pool.connection() as conn:
        for org in fleet.orgs:
            mine = [(a, o) for a, o in fleet.agents if o == org and a != fleet.deleted]
            assert sorted(read_org_facts(conn, org), key=lambda f: f.agent_id.int) == sorted(
                read_facts_of(conn, mine), key=lambda f: f.agent_id.int
            )


def test_the_rollout_counts_are_the_agents_views(
    fleet: Fleet, services: Services, pool: Pool, clock: ManualClock
) -> None:
    """Each pair's counts add up the views of the agents last seen on it."""
    now = clock.now()
    overview = services.rollout.overview(now)
    with pool.connection() as conn:
        views = release_views(conn, read_fleet_facts(conn), now)
    for pair in overview.pairs:
        on_pair = [
            v
            for v in views
            if v.track_seen and (v.track.channel, v.track.platform) == (pair.channel, pair.platform)
        ]
        assert pair.agents == len(on_pair)
        assert pair.pinned == sum(v.pinned for v in on_pair)
        assert pair.up_to_date == sum(v.up_to_date for v in on_pair)
        assert pair.held == sum(v.hold is not None and not v.up_to_date for v in on_pair)


def test_an_agents_own_pin_wins_over_its_organisations(
    fleet: Fleet, services: Services, clock: ManualClock
) -> None:
    """Read alone and with the rest of its organisation, an agent pinned to 1.1.0 in an
    organisation pinned to 1.0.0 is offered 1.1.0; its neighbours 1.0.0."""
    now = clock.now()
    org = fleet.orgs[1]
    pinned_alone = {pin.agent_id for pin in services.pins.pins().pins}
    own, neighbour = [
        view.agent_id
        for view in services.rollout.org_agent_releases(org, now=now).agents
        if view.track == STABLE and view.agent_id not in pinned_alone
    ][:2]
    services.pins.pin(agent_id=own, version="1.1.0", reason="t", actor=OPERATOR, now=now)
    alone = services.rollout.agent_release(own, org_id=org, now=now)
    listed = {v.agent_id: v for v in services.rollout.org_agent_releases(org, now=now).agents}
    for view in (alone, listed[own]):
        assert view.basis == "pinned"
        assert view.offered is not None and view.offered.version == "1.1.0"
    assert listed[neighbour].offered is not None
    assert listed[neighbour].offered.version == "1.0.0"
