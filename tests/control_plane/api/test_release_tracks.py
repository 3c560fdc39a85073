"""One current release per (channel, platform): what an agent is offered depends on the pair it
follows, and publishing for one pair never changes what another pair is offered.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
BETA = {"channel": "beta", "platform": "linux-x86_64"}
ARM = {"channel": "stable", "platform": "linux-aarch64"}


@pytest.fixture
def at_0301(clock: ManualClock) -> ManualClock:
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    return clock


def _publish(services: Services, release: SignedRelease, clock: ManualClock) -> None:
    services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )


@pytest.fixture
def beta_published(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    published: SignedRelease,
) -> SignedRelease:
    """Stable 1.5.0 (manifest_version 42), then beta 1.6.0-beta.1 (manifest_version 43)."""
    beta = sign_release(release_key, version="1.6.0-beta.1", manifest_version=43, channel="beta")
    _publish(services, beta, clock)
    return beta


def _config(api: Api, agent: Agent, **track: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.get("/v1/agent/config", params=track)


def _claim(api: Api, agent: Agent, **extra: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(
            "/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1", **extra}
        )


def _claimed_manifest(response: httpx.Response) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads(
        base64.b64decode(response.json()["release"]["manifest_b64"])
    )
    return manifest


def test_publishing_beta_leaves_stable_agents_on_stable(
    api: Api,
    at_0301: ManualClock,
    beta_published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    explicit, old_agent = make_agent(org, "web-01"), make_agent(org, "web-02")
    stable = _config(api, explicit, channel="stable", platform="linux-x86_64").json()
    assert stable["track"] == {"channel": "stable", "platform": "linux-x86_64"}
    assert stable["release"]["version"] == "1.5.0"
    # An agent older than channels names no pair: it follows the defaults.
    assert _config(api, old_agent).json()["release"]["version"] == "1.5.0"

    claimed = _claim(api, explicit, channel="stable", platform="linux-x86_64")
    assert claimed.status_code == 201
    assert claimed.json()["release"]["version"] == "1.5.0"
    assert _claimed_manifest(claimed)["channel"] == "stable"
    assert _claim(api, old_agent).json()["release"]["version"] == "1.5.0"


def test_a_beta_agent_is_offered_the_beta_release(
    api: Api,
    at_0301: ManualClock,
    beta_published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    config = _config(api, agent, **BETA).json()
    assert config["release"] == {
        "version": "1.6.0-beta.1",
        "manifest_version": 43,
        "channel": "beta",
        "platform": "linux-x86_64",
    }
    claimed = _claim(api, agent, **BETA)
    assert claimed.status_code == 201
    assert _claimed_manifest(claimed)["channel"] == "beta"


def test_a_pair_without_a_release_has_nothing_to_claim(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    assert _config(api, agent, **ARM).json()["release"] is None
    refused = _claim(api, agent, **ARM)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "no_release"
    assert "linux-aarch64" in refused.json()["detail"]["message"]


def test_nothing_to_do_is_judged_per_pair(
    api: Api,
    at_0301: ManualClock,
    beta_published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """A stable agent on 1.5.0 is up to date although a newer beta exists; a beta agent on 1.5.0
    is not."""
    org = make_org()
    stable_agent, beta_agent = make_agent(org, "web-01"), make_agent(org, "web-02")
    stable_offer = _config(api, stable_agent).json()["release"]["version"]
    beta_offer = _config(api, beta_agent, **BETA).json()["release"]["version"]
    assert (stable_offer, beta_offer) == ("1.5.0", "1.6.0-beta.1")
    with api.client(stable_agent.agent_key) as client:
        recorded = client.post(
            "/v1/agent/runs", json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}
        )
    assert recorded.status_code == 201
    assert _claim(api, beta_agent, **BETA).json()["release"]["version"] == "1.6.0-beta.1"


def test_publishing_for_one_pair_keeps_the_others_config_and_etag(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    stable_before = _config(api, agent)
    beta_before = _config(api, agent, **BETA)
    assert stable_before.headers["ETag"] != beta_before.headers["ETag"]
    _publish(
        services,
        sign_release(release_key, version="1.6.0-beta.1", manifest_version=7, channel="beta"),
        clock,
    )
    with api.client(agent.agent_key) as client:
        stable_after = client.get(
            "/v1/agent/config", headers={"If-None-Match": stable_before.headers["ETag"]}
        )
        beta_after = client.get(
            "/v1/agent/config",
            params=BETA,
            headers={"If-None-Match": beta_before.headers["ETag"]},
        )
    assert stable_after.status_code == 304
    assert beta_after.status_code == 200
    assert beta_after.json()["release"]["version"] == "1.6.0-beta.1"


def test_manifest_versions_are_a_sequence_per_pair(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    published: SignedRelease,
) -> None:
    """Beta may start its own numbering below stable's, and stable 42 again on arm is no clash."""
    _publish(services, sign_release(release_key, manifest_version=1, channel="beta"), clock)
    _publish(
        services, sign_release(release_key, manifest_version=42, platform="linux-aarch64"), clock
    )


@pytest.mark.parametrize(
    "track",
    [
        pytest.param({"channel": "Stable"}, id="upper_case_channel"),
        pytest.param({"platform": "-linux"}, id="leading_dash_platform"),
        pytest.param({"channel": "s" * 64}, id="channel_too_long"),
        pytest.param({"platform": "linux x86"}, id="space_in_platform"),
    ],
)
def test_a_malformed_pair_is_a_422(
    api: Api,
    at_0301: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    track: dict[str, str],
) -> None:
    agent = make_agent(make_org())
    assert _config(api, agent, **track).status_code == 422
    assert _claim(api, agent, **track).status_code == 422
