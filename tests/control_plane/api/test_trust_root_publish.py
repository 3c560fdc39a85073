"""Publishing trust roots, as an attacker would try it: the control plane stores only a root
every agent would accept after the newest stored, and a refusal leaves the stored chain as it
was."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.errors import Conflict
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.trust_roots.services import PublishedTrustRoot
from control_plane.types import Pool
from signed_release.trust_root import new_trust_root, successor_root
from tests.control_plane.conftest import Agent, Api, Org, sign_release
from tests.control_plane.root_chain import LATER, RootChain, signed
from tests.worlds.clocks import ManualClock

PUBLISH = "/v1/admin/trust-roots"


@pytest.fixture
def chain() -> RootChain:
    return RootChain()


def _publish(api: Api, key: str, body: bytes) -> httpx.Response:
    with api.client(key) as client:
        return client.post(PUBLISH, content=body, headers={"Content-Type": "application/json"})


def _stored(pool: Pool) -> list[tuple[Any, ...]]:
    """The stored chain and its trail, to show a refusal changed nothing."""
    with pool.connection() as conn:
        roots = conn.execute("SELECT version, body FROM trust_roots ORDER BY version").fetchall()
        events = conn.execute(
            "SELECT data FROM events WHERE kind = 'trust_root.published' ORDER BY at"
        ).fetchall()
    return [tuple(row.values()) for row in roots + events]


def _refused(
    api: Api, pool: Pool, key: str, body: bytes, status: int, mentions: str
) -> dict[str, Any]:
    before = _stored(pool)
    answer = _publish(api, key, body)
    assert answer.status_code == status, answer.text
    assert mentions in answer.text
    assert _stored(pool) == before
    detail: dict[str, Any] = answer.json()["detail"]
    return detail


def test_a_chain_is_published_and_listed_with_its_trail(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    first = _publish(api, operator_key, chain.v1)
    assert first.status_code == 201
    assert first.json()["version"] == 1
    v2 = chain.next(chain.v1)
    assert _publish(api, operator_key, v2).status_code == 201
    with api.client(operator_key) as client:
        listed = client.get(PUBLISH).json()
    assert [root["version"] for root in listed["roots"]] == [2, 1]
    assert listed["newest_version"] == 2
    assert listed["roots"][0]["published_by"] == "tests"
    with pool.connection() as conn:
        trail = conn.execute(
            "SELECT actor_name, data->>'version' AS version FROM events"
            " WHERE kind = 'trust_root.published' ORDER BY at, (data->>'version')"
        ).fetchall()
    assert [(row["actor_name"], row["version"]) for row in trail] == [
        ("tests", "1"),
        ("tests", "2"),
    ]


def test_the_same_bytes_again_change_nothing(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    before = _stored(pool)
    again = _publish(api, operator_key, chain.v1)
    assert again.status_code == 200
    assert again.json()["already_published"] is True
    assert _stored(pool) == before


def test_other_bytes_under_a_published_version_are_a_conflict(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    assert _publish(api, operator_key, chain.next(chain.v1)).status_code == 201
    # v1 signed by a third root key as well: valid, but not the bytes agents may already hold.
    resigned = signed(chain.v1, chain.root_keys[2:])
    detail = _refused(api, pool, operator_key, resigned, 409, "v1 is already published")
    assert detail["code"] == "trust_root_version_taken"


def test_a_first_root_below_its_own_threshold_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    lone = signed(
        new_trust_root(
            version=1,
            expires=LATER,
            root_keys=[key.public_key() for key in chain.root_keys],
            root_threshold=2,
            release_keys=[chain.release_key.public_key()],
        ),
        chain.root_keys[:1],
    )
    _refused(api, pool, operator_key, lone, 422, "1 valid signatures by its own root keys")


def test_a_first_root_that_is_not_version_one_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    v2 = chain.next(chain.v1)
    _refused(api, pool, operator_key, v2, 422, "must be version 1")


def test_a_version_that_skips_one_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    v3 = chain.next(chain.next(chain.v1))
    _refused(api, pool, operator_key, v3, 422, "skips versions")


def test_a_successor_below_the_previous_threshold_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    lone = chain.next(chain.v1, signers=chain.root_keys[:1])
    _refused(api, pool, operator_key, lone, 422, "by the previous root keys")


def test_a_successor_signed_only_by_new_root_keys_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    """Whoever holds the new keys but not the old ones cannot take the chain over."""
    assert _publish(api, operator_key, chain.v1).status_code == 201
    usurpers = [Ed25519PrivateKey.generate() for _ in range(2)]
    taken = signed(
        successor_root(
            chain.v1,
            expires=LATER,
            root_keys=[key.public_key() for key in usurpers],
            root_threshold=2,
            release_keys=[Ed25519PrivateKey.generate().public_key()],
        ),
        usurpers,
    )
    _refused(api, pool, operator_key, taken, 422, "0 valid signatures by the previous")


def test_one_key_signing_twice_counts_once(
    api: Api, pool: Pool, operator_key: str, chain: RootChain
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    twice = chain.next(chain.v1, signers=[chain.root_keys[0], chain.root_keys[0]])
    _refused(api, pool, operator_key, twice, 422, "1 valid signatures by the previous")


def test_an_expired_root_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain, clock: ManualClock
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    expired = chain.next(chain.v1, expires=clock.now() - timedelta(seconds=1))
    _refused(api, pool, operator_key, expired, 422, "expired")


def test_a_root_that_expires_the_moment_it_arrives_is_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain, clock: ManualClock
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    ending: datetime = clock.now()
    _refused(api, pool, operator_key, chain.next(chain.v1, expires=ending), 422, "expired")


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x00\xff garbage", id="binary"),
        pytest.param(b"[]", id="json_array"),
        pytest.param(b'{"signed": {"_type": "root"}, "signatures": []}', id="root_without_keys"),
        pytest.param(b'{"signed": {"_type": "targets"}}', id="other_metadata"),
    ],
)
def test_bytes_that_are_no_root_are_refused(
    api: Api, pool: Pool, operator_key: str, chain: RootChain, body: bytes
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    detail = _refused(api, pool, operator_key, body, 422, "trust root")
    assert detail["code"] in ("trust_root_rejected", "invalid_request")


def test_a_ten_megabyte_body_is_refused_before_it_is_read(
    api: Api, pool: Pool, operator_key: str
) -> None:
    before = _stored(pool)
    with api.client(operator_key) as client:
        declared = client.post(PUBLISH, content=b"{" + b" " * (10 * 1024 * 1024) + b"}")
    assert declared.status_code == 413

    def chunks() -> Iterator[bytes]:
        for _ in range(160):
            yield b" " * 65536

    with api.client(operator_key) as client:
        streamed = client.post(PUBLISH, content=chunks())
    assert streamed.status_code == 413
    assert _stored(pool) == before


def test_only_an_operator_publishes_or_lists(
    api: Api,
    pool: Pool,
    chain: RootChain,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    for key in (org.panel_key, agent.agent_key):
        _refused(api, pool, key, chain.v1, 403, "")
        with api.client(key) as client:
            assert client.get(PUBLISH).status_code == 403
    with api.client() as client:
        assert client.post(PUBLISH, content=chain.v1).status_code == 401
        assert client.get(PUBLISH).status_code == 401
    assert _stored(pool) == []


def test_two_publishers_at_once_store_one_root(
    services: Services, pool: Pool, chain: RootChain, clock: ManualClock
) -> None:
    actor = Actor(kind="operator", name="tests")
    services.trust_roots.publish(chain.v1, now=clock.now(), actor=actor)
    rivals = [chain.next(chain.v1), chain.next(chain.v1, signers=chain.root_keys[:2])]
    assert rivals[0] != rivals[1]
    outcomes: list[object] = []
    start = threading.Barrier(len(rivals))

    def publish(body: bytes) -> None:
        start.wait()
        try:
            outcomes.append(services.trust_roots.publish(body, now=clock.now(), actor=actor))
        except Conflict as refused:
            outcomes.append(refused)

    threads = [threading.Thread(target=publish, args=(body,)) for body in rivals]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(type(outcome).__name__ for outcome in outcomes) == [
        "Conflict",
        "PublishedTrustRoot",
    ]
    stored = next(o for o in outcomes if isinstance(o, PublishedTrustRoot))
    assert stored.version == 2
    assert [row[0] for row in _stored(pool)[:2]] == [1, 2]


def test_the_list_counts_the_agents_by_the_root_they_hold(
    api: Api,
    pool: Pool,
    clock: ManualClock,
    operator_key: str,
    chain: RootChain,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    assert _publish(api, operator_key, chain.next(chain.v1)).status_code == 201
    org = make_org()
    holders = {"1": 2, "2": 1, None: 1}
    for held, count in holders.items():
        for index in range(count):
            agent = make_agent(org, f"web-{held}-{index}")
            headers = {} if held is None else {"X-Nachtwacht-Trust-Root": held}
            with api.client(agent.agent_key) as client:
                assert client.get("/v1/agent/config", headers=headers).status_code == 200
    gone = make_agent(org, "gone")
    with api.client(gone.agent_key) as client:
        client.get("/v1/agent/config", headers={"X-Nachtwacht-Trust-Root": "1"})
    actor = Actor(kind="operator", name="tests")
    api.services.accounts.delete_agent(UUID(gone.agent_id), now=clock.now(), actor=actor)
    with api.client(operator_key) as client:
        listed = client.get(PUBLISH).json()
    assert [(r["version"], r["agents_holding"]) for r in listed["roots"]] == [(2, 1), (1, 2)]
    assert listed["agents_holding_none"] == 1
    assert listed["agents_holding_older"] == 2


def test_publishing_a_root_names_every_live_release_it_leaves_unverifiable(
    api: Api,
    services: Services,
    pool: Pool,
    operator_key: str,
    chain: RootChain,
    clock: ManualClock,
) -> None:
    """Key A signed stable 1.4.0, 1.5.0 (everyone) and 1.6.0 (in its canary stage). A root
    naming only key B leaves all three unverifiable to the agents following it, yet 1.6.0 is
    offered to the canaries, 1.5.0 to every other host and 1.4.0 to hosts pinned to it: the
    answer names each with what to do, and publishing is not refused (a compromised key must be
    revoked at once)."""
    old_key, new_key = chain.release_key, Ed25519PrivateKey.generate()
    assert _publish(api, operator_key, chain.v1).json()["unverifiable_releases"] == []
    published = {}
    for version, manifest_version, stage in (
        ("1.2.0", 40, "everyone"),
        ("1.4.0", 41, "everyone"),
        ("1.5.0", 42, "everyone"),
        ("1.6.0", 43, None),
    ):
        release = sign_release(old_key, version=version, manifest_version=manifest_version)
        published[version] = services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now(), stage=stage
        )
    services.releases.withdraw(published["1.2.0"].id, reason="not needed", now=clock.now())
    updater = sign_release(old_key, version="0.9.0", manifest_version=9, product="updater")
    published_updater = services.releases.publish(
        updater.manifest, updater.signature, updater.artifact, now=clock.now()
    )

    # Rotating: both keys named, nothing is left unverifiable.
    both = signed(
        successor_root(
            chain.v1,
            expires=LATER,
            release_keys=[old_key.public_key(), new_key.public_key()],
        ),
        chain.root_keys[1:],
    )
    assert _publish(api, operator_key, both).json()["unverifiable_releases"] == []

    # Revoking key A: published all the same, with each release it leaves unverifiable named.
    revoked = chain.next(both, release_key=new_key)
    answer = _publish(api, operator_key, revoked)
    assert answer.status_code == 201, answer.text
    found = {entry["version"]: entry for entry in answer.json()["unverifiable_releases"]}
    assert set(found) == {"1.4.0", "1.5.0", "1.6.0", "0.9.0"}  # not the withdrawn 1.2.0
    # Nachtwacht's own agent, the updater, is signed again as its own product line.
    assert (found["0.9.0"]["product"], found["0.9.0"]["offered_as"]) == ("updater", "current")
    assert found["0.9.0"]["commands"][0].startswith(
        "nachtwacht release sign --key release.key --product updater --version 0.9.0"
    )
    assert found["0.9.0"]["commands"][1].startswith(
        "nachtwacht control publish-release --product updater "
    )
    del found["0.9.0"]
    assert {version: entry["offered_as"] for version, entry in found.items()} == {
        "1.6.0": "current",
        "1.5.0": "previous",
        "1.4.0": "stored",
    }
    assert found["1.6.0"]["commands"] == [
        "nachtwacht release sign --key release.key --version 1.6.0 --channel stable"
        " --platform linux-x86_64 --out release-1.6.0-again BUILD-1.6.0.tar.gz",
        "nachtwacht control publish-release release-1.6.0-again/manifest.json"
        " release-1.6.0-again/manifest.sig BUILD-1.6.0.tar.gz",
    ]
    assert found["1.5.0"]["commands"][0].startswith(
        f"nachtwacht control promote {published['1.6.0'].id} --reason "
    )
    assert found["1.5.0"]["commands"][1].startswith(
        f"nachtwacht control withdraw-release {published['1.5.0'].id} --reason "
    )
    assert "--allow-downgrade" in found["1.4.0"]["commands"][1]  # older than the current 1.6.0
    with pool.connection() as conn:
        event = conn.execute(
            "SELECT data FROM events WHERE kind = 'trust_root.published'"
            " ORDER BY (data->>'version')::int DESC LIMIT 1"
        ).fetchone()
    assert event is not None
    assert sorted(event["data"]["unverifiable_release_ids"]) == sorted(
        [str(published[version].id) for version in ("1.4.0", "1.5.0", "1.6.0")]
        + [str(published_updater.id)]
    )

    # The current build signed again with key B, and the rest withdrawn: the same root
    # published again says nothing is left.
    again = sign_release(new_key, version="1.6.0", manifest_version=44)
    services.releases.publish(again.manifest, again.signature, again.artifact, now=clock.now())
    for release_id in (published["1.4.0"].id, published["1.5.0"].id, published_updater.id):
        services.releases.withdraw(release_id, reason="key revoked", now=clock.now())
    republished = _publish(api, operator_key, revoked)
    assert republished.status_code == 200
    assert republished.json()["unverifiable_releases"] == []


def test_an_older_roots_bytes_again_list_what_the_newest_leaves_unverifiable(
    api: Api, services: Services, operator_key: str, chain: RootChain, clock: ManualClock
) -> None:
    """The newest root is the one agents follow: whichever stored version's file an operator
    publishes again to check that nothing is left, the answer is the newest's list, and says
    which version that is."""
    assert _publish(api, operator_key, chain.v1).status_code == 201
    release = sign_release(chain.release_key, version="1.6.0", manifest_version=43)
    published = services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    v2 = chain.next(chain.v1, release_key=Ed25519PrivateKey.generate())
    assert _publish(api, operator_key, v2).status_code == 201
    again = _publish(api, operator_key, chain.v1)
    assert again.status_code == 200, again.text
    answer = again.json()
    assert (answer["version"], answer["newest_version"]) == (1, 2)
    assert [entry["release_id"] for entry in answer["unverifiable_releases"]] == [str(published.id)]
    with api.client(operator_key) as client:
        listed = client.get(PUBLISH).json()
    assert [entry["version"] for entry in listed["unverifiable_releases"]] == ["1.6.0"]
