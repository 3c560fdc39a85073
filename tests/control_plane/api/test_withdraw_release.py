"""Withdrawing a release: claims stop offering it at once, its outstanding tokens are refused,
the pair falls back to its previous release (or the one the operator names), agents already on it
stay and are listed, and re-publishing the same manifest is idempotent.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
"""

from __future__ import annotations

import base64
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


@pytest.fixture
def at_0301(clock: ManualClock) -> ManualClock:
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    return clock


@pytest.fixture
def newer(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    published: SignedRelease,
) -> SignedRelease:
    """Stable 1.5.0 (42), then stable 1.6.0 (43), current and offered to everyone (published
    past the canary stage: these tests are about withdrawing, not staging)."""
    release = sign_release(release_key, version="1.6.0", manifest_version=43)
    services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now(), stage="everyone"
    )
    return release


def _release_id(services: Services, version: str) -> str:
    for track in services.releases.list().tracks:
        for entry in track.releases:
            if entry.version == version:
                return str(entry.id)
    raise AssertionError(f"no release {version}")


def _claim(api: Api, agent: Agent, **extra: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(
            "/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.5.0", **extra}
        )


def _withdraw(api: Api, operator_key: str, release_id: str, **body: Any) -> httpx.Response:
    with api.client(operator_key) as operator:
        return operator.post(f"/v1/admin/releases/{release_id}/withdraw", json=body)


def _download(api: Api, agent: Agent, grant: dict[str, Any]) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.get(grant["release"]["artifact_url"])


def test_withdraw_mid_window_refuses_the_download_and_the_next_claim_gets_the_previous(
    api: Api,
    services: Services,
    at_0301: ManualClock,
    newer: SignedRelease,
    published: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    first = _claim(api, agent).json()
    assert first["release"]["version"] == "1.6.0"

    withdrawn = _withdraw(
        api, operator_key, _release_id(services, "1.6.0"), reason="corrupts the cache"
    )
    assert withdrawn.status_code == 200
    assert withdrawn.json()["current_version"] == "1.5.0"
    assert withdrawn.json()["revoked_tokens"] == 1

    refused = _download(api, agent, first)
    assert refused.status_code == 403
    assert refused.json()["detail"]["code"] == "token_revoked"

    at_0301.advance(minutes=1)
    again = _claim(api, agent)
    assert again.status_code == 200  # the same slot's run, a new lease
    assert again.json()["release"]["version"] == "1.5.0"
    assert base64.b64decode(again.json()["release"]["manifest_b64"]) == published.manifest
    assert again.json()["token"]["id"] != first["token"]["id"]
    download = _download(api, agent, again.json())
    assert download.status_code == 200
    assert download.content == published.artifact
    with api.client(agent.agent_key) as client:
        config = client.get("/v1/agent/config").json()
    assert config["release"]["version"] == "1.5.0"


def test_withdraw_names_a_replacement_of_the_same_pair(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    newer: SignedRelease,
    operator_key: str,
) -> None:
    release = sign_release(release_key, version="1.7.0", manifest_version=44)
    services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    withdrawn = _withdraw(
        api,
        operator_key,
        _release_id(services, "1.7.0"),
        reason="bad build",
        replacement="1.5.0",
    )
    assert withdrawn.status_code == 200
    assert withdrawn.json()["current_version"] == "1.5.0"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param({}, 422, id="no_reason"),
        pytest.param({"reason": ""}, 422, id="empty_reason"),
        pytest.param({"reason": "   "}, 422, id="blank_reason"),
        pytest.param({"reason": "bad", "replacement": "9.9.9"}, 422, id="unknown_replacement"),
        pytest.param({"reason": "bad", "replacement": "1.6.0"}, 422, id="itself_as_replacement"),
    ],
)
def test_withdraw_refuses_without_a_reason_or_with_a_foreign_replacement(
    api: Api,
    services: Services,
    newer: SignedRelease,
    operator_key: str,
    body: dict[str, Any],
    status: int,
) -> None:
    release_id = _release_id(services, "1.6.0")
    assert _withdraw(api, operator_key, release_id, **body).status_code == status
    assert services.releases.list().tracks[0].releases[0].current


def test_a_replacement_from_another_pair_is_refused(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    newer: SignedRelease,
    operator_key: str,
) -> None:
    beta = sign_release(release_key, version="2.0.0-beta.1", manifest_version=1, channel="beta")
    services.releases.publish(beta.manifest, beta.signature, beta.artifact, now=clock.now())
    refused = _withdraw(
        api,
        operator_key,
        _release_id(services, "1.6.0"),
        reason="bad",
        replacement="2.0.0-beta.1",
    )
    assert refused.status_code == 422


def test_withdrawing_twice_is_a_conflict_and_unknown_is_404(
    api: Api, services: Services, newer: SignedRelease, operator_key: str
) -> None:
    release_id = _release_id(services, "1.6.0")
    assert _withdraw(api, operator_key, release_id, reason="bad").status_code == 200
    assert _withdraw(api, operator_key, release_id, reason="bad").status_code == 409
    unknown = _withdraw(api, operator_key, "00000000-0000-0000-0000-000000000000", reason="x")
    assert unknown.status_code == 404


def test_withdrawing_the_only_release_leaves_the_pair_with_nothing_to_claim(
    api: Api,
    services: Services,
    at_0301: ManualClock,
    published: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    withdrawn = _withdraw(api, operator_key, _release_id(services, "1.5.0"), reason="bad")
    assert withdrawn.json()["current_version"] is None
    refused = _claim(api, make_agent(make_org()))
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "no_release"


def test_withdrawing_leaves_other_pairs_alone(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    at_0301: ManualClock,
    newer: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    beta = sign_release(release_key, version="1.6.0", manifest_version=43, channel="beta")
    services.releases.publish(beta.manifest, beta.signature, beta.artifact, now=clock.now())
    agent = make_agent(make_org())
    beta_grant = _claim(api, agent, channel="beta").json()
    stable_id = next(
        str(entry.id)
        for track in services.releases.list().tracks
        if track.channel == "stable"
        for entry in track.releases
        if entry.version == "1.6.0"
    )
    assert _withdraw(api, operator_key, stable_id, reason="bad").json()["revoked_tokens"] == 0
    assert _download(api, agent, beta_grant).status_code == 200


def test_the_list_marks_withdrawn_releases_and_the_agents_that_run_them(
    api: Api,
    services: Services,
    at_0301: ManualClock,
    newer: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    updated, untouched = make_agent(org, "web-01"), make_agent(org, "web-02")
    grant = _claim(api, updated).json()
    with api.client(updated.agent_key) as client:
        reported = client.patch(
            f"/v1/agent/runs/{grant['run_id']}", json={"status": "succeeded", "version": "1.6.0"}
        )
    assert reported.status_code == 200
    with api.client(untouched.agent_key) as client:
        client.post(
            "/v1/agent/runs", json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}
        )
    _withdraw(api, operator_key, _release_id(services, "1.6.0"), reason="corrupts the cache")

    with api.client(operator_key) as operator:
        listed = operator.get("/v1/admin/releases")
    assert listed.status_code == 200
    (track,) = listed.json()["tracks"]
    assert (track["channel"], track["platform"]) == ("stable", "linux-x86_64")
    withdrawn, previous = track["releases"]
    assert withdrawn["version"] == "1.6.0"
    assert withdrawn["withdrawn_reason"] == "corrupts the cache"
    assert withdrawn["withdrawn_at"] is not None
    assert withdrawn["current"] is False
    assert [agent["name"] for agent in withdrawn["agents_running"]] == ["web-01"]
    assert (previous["version"], previous["current"], previous["withdrawn_at"]) == (
        "1.5.0",
        True,
        None,
    )
    # Agents already on it stay: nothing asks them to roll back.
    with api.client(updated.agent_key) as client:
        assert client.get("/v1/agent/config").json()["release"]["version"] == "1.5.0"


def test_withdrawal_is_in_the_trail_with_its_actor(
    api: Api, services: Services, newer: SignedRelease, operator_key: str
) -> None:
    _withdraw(api, operator_key, _release_id(services, "1.6.0"), reason="bad build")
    with api.client(operator_key) as operator:
        trail = operator.get("/v1/admin/events", params={"kind": "release."}).json()["events"]
    latest = trail[0]
    assert latest["kind"] == "release.withdrawn"
    assert latest["actor"]["kind"] == "operator"
    assert latest["actor"]["id"] is not None
    assert latest["data"]["reason"] == "bad build"
    assert latest["data"]["current_version"] == "1.5.0"


def test_republishing_the_same_manifest_is_idempotent(
    api: Api, published: SignedRelease, operator_key: str
) -> None:
    body = {
        "manifest_b64": base64.b64encode(published.manifest).decode(),
        "signature_b64": base64.b64encode(published.signature).decode(),
        "artifact_b64": base64.b64encode(published.artifact).decode(),
    }
    with api.client(operator_key) as operator:
        again = operator.post("/v1/admin/releases", json=body)
        listed = operator.get("/v1/admin/releases").json()
    assert again.status_code == 200
    assert again.json()["already_published"] is True
    assert again.json()["version"] == "1.5.0"
    assert len(listed["tracks"][0]["releases"]) == 1


def test_another_manifest_with_a_taken_manifest_version_is_a_conflict(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    operator_key: str,
) -> None:
    other = sign_release(release_key, version="1.5.1", manifest_version=42)
    body = {
        "manifest_b64": base64.b64encode(other.manifest).decode(),
        "signature_b64": base64.b64encode(other.signature).decode(),
        "artifact_b64": base64.b64encode(other.artifact).decode(),
    }
    with api.client(operator_key) as operator:
        refused = operator.post("/v1/admin/releases", json=body)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "release_not_newer"


def test_halting_a_withdrawn_release_is_a_409_and_changes_nothing(
    api: Api, services: Services, newer: SignedRelease, operator_key: str, pool: Any
) -> None:
    """Claims of a withdrawn release are refused and its tokens revoked already: a halt would
    only add a halt row and an event saying claims wait "until it is resumed"."""
    from tests.control_plane.conftest import table_rows

    release_id = _release_id(services, "1.6.0")
    with api.client(operator_key) as client:
        withdrawn = client.post(f"/v1/admin/releases/{release_id}/withdraw", json={"reason": "x"})
        assert withdrawn.status_code == 200, withdrawn.text
        before = table_rows(pool, ("release_halts", "releases", "events", "tokens"))
        halted = client.post(f"/v1/admin/releases/{release_id}/halt", json={"reason": "x"})
    assert halted.status_code == 409, halted.text
    detail = halted.json()["detail"]
    assert detail["code"] == "release_withdrawn"
    assert "(1.6.0) is withdrawn" in detail["message"]
    assert table_rows(pool, ("release_halts", "releases", "events", "tokens")) == before
