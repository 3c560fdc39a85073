"""The pair's current build signed again with a new release key, after the old key was revoked
through the trust root: the new signing takes the old one's place — current at once, in the wave
the build had reached, reaching the same agents, its soak going on — and a downgrade the pair was
rolled back to, signed again, becomes current without a second rollback. Real keys, real trust
roots, real claims over HTTP."""

from __future__ import annotations

from datetime import timedelta
from uuid import UUID

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.errors import Conflict
from control_plane.events.trail import Actor
from control_plane.releases.rollback import RolledBack
from control_plane.releases.services import PublishedRelease
from control_plane.rollout.offer import CANARY_BUCKETS, canary_bucket
from tests.control_plane.api.conftest import AT_0301, Rollout
from tests.control_plane.conftest import Agent, SignedRelease, sign_release
from tests.control_plane.root_chain import RootChain

OPERATOR = Actor(kind="operator", name="tests")
THREE_WAVES = [
    {"share_percent": 0, "canaries": True, "soak_minutes": 120},
    {"share_percent": 30, "soak_minutes": 60},
    {"share_percent": 100},
]
BUILD_1_5 = bytes(range(256)) * 40
BUILD_1_6 = bytes(range(255, -1, -1)) * 40


class World:
    """A trust root naming release key A, stable 1.5.0 (everyone) and 1.6.0 (wave 1), both
    signed by A; `revoke` publishes the next root, naming key B only."""

    def __init__(self, rollout: Rollout) -> None:
        self.rollout = rollout
        self.chain = RootChain()
        self.old_key = self.chain.release_key
        self.new_key = Ed25519PrivateKey.generate()
        self.publish_root(self.chain.v1)
        self.first = self.publish(self.sign(self.old_key, "1.5.0", 42, BUILD_1_5))
        self.second = self.publish(self.sign(self.old_key, "1.6.0", 43, BUILD_1_6))

    def publish_root(self, root: bytes) -> None:
        self.rollout.services.trust_roots.publish(
            root, now=self.rollout.clock.now(), actor=OPERATOR
        )

    def revoke(self) -> None:
        self.publish_root(self.chain.next(self.chain.v1, release_key=self.new_key))

    @staticmethod
    def sign(
        key: Ed25519PrivateKey,
        version: str,
        manifest_version: int,
        build: bytes,
        *,
        allow_downgrade: bool = False,
    ) -> SignedRelease:
        return sign_release(
            key,
            version=version,
            manifest_version=manifest_version,
            artifact=build,
            allow_downgrade=allow_downgrade,
        )

    def publish(self, release: SignedRelease, **options: object) -> PublishedRelease:
        return self.rollout.services.releases.publish(
            release.manifest,
            release.signature,
            release.artifact,
            now=self.rollout.clock.now(),
            actor=OPERATOR,
            **options,  # type: ignore[arg-type]
        )

    def offered(self, agent: Agent) -> tuple[str, int] | None:
        """The version and manifest_version the agent's config offers."""
        release = self.rollout.config(agent)["release"]
        return None if release is None else (release["version"], release["manifest_version"])

    def current_id(self) -> UUID:
        with self.rollout.pool.connection() as conn:
            row = conn.execute("SELECT release_id FROM current_releases").fetchone()
        assert row is not None
        return UUID(str(row["release_id"]))

    def withdrawn_reason(self, release: PublishedRelease) -> str | None:
        with self.rollout.pool.connection() as conn:
            row = conn.execute(
                "SELECT withdrawn_reason FROM releases WHERE id = %s", [release.id]
            ).fetchone()
        assert row is not None
        reason: str | None = row["withdrawn_reason"]
        return reason


@pytest.fixture
def world(rollout: Rollout) -> World:
    rollout.settings(waves=THREE_WAVES)
    rollout.operator("PUT", "/v1/admin/settings", org_cap=25, global_cap=25)
    return World(rollout)


def _fleet(world: World) -> tuple[list[Agent], list[Agent]]:
    """Agents of one organisation until four fall in 1.6.0's 30 % wave and four outside it."""
    org = world.rollout.make_org("Fleet")
    inside: list[Agent] = []
    outside: list[Agent] = []
    n = 0
    while len(inside) < 4 or len(outside) < 4:
        agent = world.rollout.make_agent(org, f"web-{n:02d}")
        n += 1
        bucket = canary_bucket(UUID(agent.agent_id), world.second.id)
        group = inside if bucket < 30 * (CANARY_BUCKETS // 100) else outside
        if len(group) < 4:
            group.append(agent)
    return inside, outside


def test_the_current_build_signed_again_keeps_its_wave_its_agents_and_its_soak(
    world: World,
) -> None:
    rollout = world.rollout
    rollout.services.rollout.promote(
        world.second.id, reason="canaries fine", actor=OPERATOR, now=rollout.clock.now(), to_wave=2
    )
    inside, outside = _fleet(world)
    # Night 1 in wave 2: one agent of the 30 % takes the first signing and succeeds.
    rollout.clock.set(AT_0301)
    grant = rollout.claim(inside[0])
    assert grant.status_code == 201, grant.text
    rollout.report(inside[0], grant.json()["run_id"], "succeeded", "1.6.0")

    # Key A is lost: the root drops it, and the release manager signs the same build with B.
    world.revoke()
    again = world.publish(world.sign(world.new_key, "1.6.0", 44, BUILD_1_6))

    assert (again.current, again.stage, again.wave, again.waves) == (True, "canary", 2, 3)
    assert (again.replaces_release_id, again.replaces_manifest_version) == (world.second.id, 43)
    assert world.current_id() == again.id
    assert (world.withdrawn_reason(world.second) or "").startswith(
        "signed again: manifest_version 44"
    )
    # The wave reaches the agents it reached: they are offered the new signing, the others
    # keep the release before it.
    assert {world.offered(agent) for agent in inside} == {("1.6.0", 44)}
    assert {world.offered(agent) for agent in outside} == {("1.5.0", 42)}

    # The wave's soak (an hour) counts from the first signing's success: it moves on to the last.
    rollout.clock.set(AT_0301 + timedelta(minutes=61))
    promoted = rollout.services.rollout.advance(rollout.clock.now()).promotions
    assert [(p.release_id, p.stage) for p in promoted] == [(again.id, "everyone")]
    assert {world.offered(agent) for agent in outside} == {("1.6.0", 44)}


def test_a_build_that_reached_everyone_signed_again_is_for_everyone(world: World) -> None:
    rollout = world.rollout
    assert rollout.promote("1.6.0").status_code == 200
    inside, outside = _fleet(world)
    rollout.clock.set(AT_0301)
    grant = rollout.claim(inside[0])
    assert grant.status_code == 201, grant.text
    rollout.report(inside[0], grant.json()["run_id"], "succeeded", "1.6.0")
    world.revoke()
    again = world.publish(world.sign(world.new_key, "1.6.0", 44, BUILD_1_6))
    assert (again.current, again.stage, again.wave) == (True, "everyone", 3)
    assert {world.offered(agent) for agent in inside + outside} == {("1.6.0", 44)}
    # The operators' list does not show the host on 1.6.0 as running a withdrawn release: its
    # build is the one offered.
    (track,) = rollout.services.releases.list().tracks
    old = next(entry for entry in track.releases if entry.id == world.second.id)
    assert old.withdrawn_at is not None
    assert old.agents_running == ()


def test_a_downgrade_rolled_back_to_and_signed_again_becomes_current(world: World) -> None:
    rollout = world.rollout
    assert rollout.promote("1.6.0").status_code == 200
    agent = rollout.make_agent(rollout.make_org("Acme"), "web-01")
    down = world.publish(
        world.sign(world.old_key, "1.5.0", 44, BUILD_1_5, allow_downgrade=True),
        allow_downgrade=True,
    )
    assert not down.current
    rollout.services.releases.roll_back(
        channel="stable",
        platform="linux-x86_64",
        to="1.5.0",
        reason="1.6.0 corrupts the cache",
        now=rollout.clock.now(),
        actor=OPERATOR,
    )
    assert world.offered(agent) == ("1.5.0", 44)

    world.revoke()
    again = world.publish(
        world.sign(world.new_key, "1.5.0", 45, BUILD_1_5, allow_downgrade=True),
        allow_downgrade=True,
    )
    assert (again.current, again.downgrade_from, again.stage) == (True, "1.6.0", "everyone")
    assert again.replaces_manifest_version == 44
    assert world.current_id() == again.id
    assert world.offered(agent) == ("1.5.0", 45)
    assert (world.withdrawn_reason(down) or "").startswith("signed again")


def test_a_halted_build_signed_again_is_a_new_rollout_and_the_halt_stays(world: World) -> None:
    """A stopped build is not carried on by a new signature: the halted signing keeps its halt,
    and the new one starts in the first wave like any release."""
    rollout = world.rollout
    rollout.services.rollout.halt(
        world.second.id, reason="fills the disk", actor=OPERATOR, now=rollout.clock.now()
    )
    world.revoke()
    again = world.publish(world.sign(world.new_key, "1.6.0", 44, BUILD_1_6))
    assert (again.replaces_release_id, again.stage, again.wave) == (None, "canary", 1)
    assert world.withdrawn_reason(world.second) is None
    with rollout.pool.connection() as conn:
        halted = conn.execute(
            "SELECT count(*) AS n FROM release_halts WHERE release_id = %s AND resumed_at IS NULL",
            [world.second.id],
        ).fetchone()
    assert halted is not None and halted["n"] == 1


def test_a_rollback_never_makes_current_a_downgrade_signed_by_a_revoked_key(
    world: World,
) -> None:
    """The downgrade stored before the revocation is one agents following the root refuse: the
    rollback says so and changes nothing; the same build signed again with the new key is the
    way back."""
    rollout = world.rollout
    assert rollout.promote("1.6.0").status_code == 200
    world.publish(
        world.sign(world.old_key, "1.5.0", 44, BUILD_1_5, allow_downgrade=True),
        allow_downgrade=True,
    )
    world.revoke()

    def back() -> RolledBack:
        return rollout.services.releases.roll_back(
            channel="stable",
            platform="linux-x86_64",
            to="1.5.0",
            reason="1.6.0 corrupts the cache",
            now=rollout.clock.now(),
            actor=OPERATOR,
        )

    with pytest.raises(Conflict, match="which trust root v2 no longer names") as refused:
        back()
    assert refused.value.code == "rollback_not_signed"
    assert "--allow-downgrade" in refused.value.message
    assert world.current_id() == world.second.id

    down = world.publish(
        world.sign(world.new_key, "1.5.0", 45, BUILD_1_5, allow_downgrade=True),
        allow_downgrade=True,
    )
    rolled = back()
    assert (rolled.to_release_id, rolled.to_manifest_version) == (down.id, 45)
    assert world.current_id() == down.id


def _download(world: World, agent: Agent, run_id: str) -> httpx.Response:
    with world.rollout.api.client(agent.agent_key) as client:
        return client.get(f"/v1/agent/runs/{run_id}/artifact")


def _granted_1_6(world: World) -> tuple[Agent, str]:
    """1.6.0 promoted to everyone and claimed at 03:01 by one agent: the agent and its run."""
    rollout = world.rollout
    assert rollout.promote("1.6.0").status_code == 200
    agent = rollout.make_agent(rollout.make_org("Acme"), "web-01")
    rollout.clock.set(AT_0301)
    grant = rollout.claim(agent)
    assert grant.status_code == 201, grant.text
    assert grant.json()["release"]["manifest_version"] == 43
    run_id: str = grant.json()["run_id"]
    return agent, run_id


def test_a_signature_renewed_with_a_trusted_key_lets_downloads_already_granted_go_on(
    world: World,
) -> None:
    """Signing again while the key is still trusted (a manifest renewed before it expires) is
    routine: a host in the middle of its update keeps its download, and installs the same build."""
    agent, run_id = _granted_1_6(world)
    again = world.publish(world.sign(world.old_key, "1.6.0", 44, BUILD_1_6))
    assert (again.replaces_manifest_version, again.replaced_tokens_revoked) == (43, None)
    assert (world.withdrawn_reason(world.second) or "").startswith("signed again")
    download = _download(world, agent, run_id)
    assert download.status_code == 200, download.text
    assert download.content == BUILD_1_6
    with world.rollout.pool.connection() as conn:
        token = conn.execute("SELECT revoked_at FROM tokens WHERE run_id = %s", [run_id]).fetchone()
    assert token is not None and token["revoked_at"] is None
    assert world.offered(agent) == ("1.6.0", 44)


def test_a_build_signed_again_after_its_key_was_dropped_revokes_the_old_downloads(
    world: World,
) -> None:
    """Hosts following the newest root refuse the old signing: its downloads are refused at
    once (`token_revoked`), and the next claim gets the new one."""
    agent, run_id = _granted_1_6(world)
    world.revoke()
    again = world.publish(world.sign(world.new_key, "1.6.0", 44, BUILD_1_6))
    assert (again.replaces_manifest_version, again.replaced_tokens_revoked) == (43, 1)
    download = _download(world, agent, run_id)
    assert download.status_code == 403
    assert download.json()["detail"]["code"] == "token_revoked"
    assert world.offered(agent) == ("1.6.0", 44)
