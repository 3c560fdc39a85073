"""Downgrades and rollbacks at the control plane: an older version is published only on purpose
and only when signed as a downgrade, it is offered to no one until an operator rolls the pair
back, and the rollback is refused while no release key signed the older build as a downgrade.

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
PAIR = {"channel": "stable", "platform": "linux-x86_64"}


@pytest.fixture
def at_0301(clock: ManualClock) -> ManualClock:
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    return clock


@pytest.fixture
def bad(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    published: SignedRelease,
) -> SignedRelease:
    """Stable 1.5.0 (42), then 1.6.0 (43) for everyone: the build to roll back from."""
    release = sign_release(release_key, version="1.6.0", manifest_version=43)
    services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now(), stage="everyone"
    )
    return release


def _publish(api: Api, operator_key: str, release: SignedRelease, **extra: Any) -> httpx.Response:
    body = {
        "manifest_b64": base64.b64encode(release.manifest).decode(),
        "signature_b64": base64.b64encode(release.signature).decode(),
        "artifact_b64": base64.b64encode(release.artifact).decode(),
        **extra,
    }
    with api.client(operator_key) as operator:
        return operator.post("/v1/admin/releases", json=body)


def _roll_back(api: Api, operator_key: str, **body: Any) -> httpx.Response:
    with api.client(operator_key) as operator:
        return operator.post(
            "/v1/admin/releases/rollback", json={**PAIR, "reason": "1.6.0 corrupts caches", **body}
        )


def _signed_downgrade(
    api: Api, operator_key: str, key: Ed25519PrivateKey, version: str, manifest_version: int
) -> SignedRelease:
    release = sign_release(
        key, version=version, manifest_version=manifest_version, allow_downgrade=True
    )
    answer = _publish(api, operator_key, release, allow_downgrade=True)
    assert answer.status_code == 201, answer.text
    return release


def _claim(api: Api, agent: Agent) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.6.0"})


def _offered(api: Api, agent: Agent) -> dict[str, Any]:
    with api.client(agent.agent_key) as client:
        release: dict[str, Any] = client.get("/v1/agent/config").json()["release"]
    return release


# -- publishing a downgrade ----------------------------------------------------------------------


def test_an_unmarked_downgrade_is_refused_naming_both_versions_and_the_missing_signature(
    api: Api,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    older = sign_release(release_key, version="1.0.5", manifest_version=44)
    refused = _publish(api, operator_key, older)
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert detail["code"] == "release_downgrade"
    assert (detail["version"], detail["newest_version"]) == ("1.0.5", "1.6.0")
    assert "1.0.5 is older than 1.6.0" in detail["message"]
    assert "--allow-downgrade" in detail["message"]
    assert "every agent on 1.6.0 would refuse it" in detail["message"]
    assert _offered(api, agent)["version"] == "1.6.0"


def test_a_downgrade_marked_but_not_signed_as_one_is_refused(
    api: Api, release_key: Ed25519PrivateKey, bad: SignedRelease, operator_key: str
) -> None:
    older = sign_release(release_key, version="1.5.0", manifest_version=44)
    refused = _publish(api, operator_key, older, allow_downgrade=True)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert detail["code"] == "release_downgrade"
    assert "manifest.allow_downgrade" in detail["message"]
    assert "every agent on 1.6.0 would refuse it" in detail["message"]
    assert "nachtwacht release sign --allow-downgrade --version 1.5.0" in detail["message"]


def test_a_signed_downgrade_unmarked_at_publication_is_still_refused(
    api: Api, release_key: Ed25519PrivateKey, bad: SignedRelease, operator_key: str
) -> None:
    older = sign_release(release_key, version="1.5.0", manifest_version=44, allow_downgrade=True)
    refused = _publish(api, operator_key, older)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "release_downgrade"
    assert "would refuse it" not in refused.json()["detail"]["message"]


def test_a_withdrawn_newer_release_still_makes_an_older_one_a_downgrade(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    clock: ManualClock,
) -> None:
    """Hosts may still run the withdrawn 1.6.0: a 1.5.1 is older than what they run."""
    entry = next(
        r for t in services.releases.list().tracks for r in t.releases if r.version == "1.6.0"
    )
    services.releases.withdraw(entry.id, reason="bad build", now=clock.now())
    older = sign_release(release_key, version="1.5.1", manifest_version=44)
    refused = _publish(api, operator_key, older)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["newest_version"] == "1.6.0"


def test_a_marked_signed_downgrade_is_stored_but_offered_to_no_one(
    api: Api,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    older = sign_release(release_key, version="1.5.0", manifest_version=44, allow_downgrade=True)
    stored = _publish(api, operator_key, older, allow_downgrade=True)
    assert stored.status_code == 201, stored.text
    assert (stored.json()["current"], stored.json()["downgrade_from"]) == (False, "1.6.0")
    assert _offered(api, agent) == {
        "version": "1.6.0",
        "manifest_version": 43,
        **PAIR,
    }
    again = _publish(api, operator_key, older, allow_downgrade=True)
    assert again.status_code == 200
    assert again.json()["current"] is False


def test_a_downgrade_of_another_build_under_the_same_version_is_refused(
    api: Api, release_key: Ed25519PrivateKey, bad: SignedRelease, operator_key: str
) -> None:
    """Hosts that ran 1.5.0 keep its folder: a different 1.5.0 build would never install."""
    rebuilt = sign_release(
        release_key,
        version="1.5.0",
        manifest_version=44,
        allow_downgrade=True,
        artifact=b"another build" * 100,
    )
    refused = _publish(api, operator_key, rebuilt, allow_downgrade=True)
    assert refused.status_code == 422, refused.text
    assert "is not the 1.5.0 build published before" in refused.json()["detail"]["message"]


def test_a_downgrade_to_a_version_the_pair_never_published_is_refused(
    api: Api, release_key: Ed25519PrivateKey, bad: SignedRelease, operator_key: str
) -> None:
    """1.5.0 and 1.6.0 were published; 1.0.0 never was: no wave ever ran it, so it is no way back
    (and a rollback to it is refused as a version without a release)."""
    untried = sign_release(
        release_key,
        version="1.0.0",
        manifest_version=44,
        allow_downgrade=True,
        artifact=b"a build no host ran" * 100,
    )
    refused = _publish(api, operator_key, untried, allow_downgrade=True)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert (detail["code"], detail["field"], detail["value"]) == (
        "release_downgrade",
        "manifest.agent_version",
        "1.0.0",
    )
    assert "was never published on stable/linux-x86_64" in detail["message"]
    rollback = _roll_back(api, operator_key, to="1.0.0")
    assert rollback.status_code == 422, rollback.text
    assert "is not the version of a release" in rollback.json()["detail"]["message"]


def test_a_newer_version_needs_no_mark(
    api: Api, release_key: Ed25519PrivateKey, bad: SignedRelease, operator_key: str
) -> None:
    newer = sign_release(release_key, version="1.7.0", manifest_version=44)
    answer = _publish(api, operator_key, newer)
    assert answer.status_code == 201, answer.text
    assert (answer.json()["current"], answer.json()["downgrade_from"]) == (True, None)


# -- the rollback action -------------------------------------------------------------------------


def test_a_rollback_without_a_signed_downgrade_release_says_what_to_run_where(
    api: Api,
    bad: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    refused = _roll_back(api, operator_key)
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert detail["code"] == "rollback_not_signed"
    assert detail["sign_command"] == (
        "nachtwacht release sign --key release.key --version 1.5.0 --channel stable"
        " --platform linux-x86_64 --allow-downgrade --out rollback-1.5.0 BUILD-1.5.0.tar.gz"
    )
    assert detail["publish_command"] == (
        "nachtwacht control publish-release --allow-downgrade rollback-1.5.0/manifest.json"
        " rollback-1.5.0/manifest.sig BUILD-1.5.0.tar.gz"
    )
    assert detail["sign_command"] in detail["message"]
    assert "holds no release key" in detail["message"]
    assert _offered(api, agent)["version"] == "1.6.0"


def test_a_downgrade_signed_before_the_bad_release_does_not_authorise_the_rollback(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    clock: ManualClock,
) -> None:
    """Hosts on 1.7.0 accepted manifest 45: a downgrade signed as 44 is below their floor."""
    _signed_downgrade(api, operator_key, release_key, "1.5.0", 44)
    newest = sign_release(release_key, version="1.7.0", manifest_version=45)
    services.releases.publish(
        newest.manifest, newest.signature, newest.artifact, now=clock.now(), stage="everyone"
    )
    refused = _roll_back(api, operator_key, to="1.5.0")
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "rollback_not_signed"


def test_an_expired_downgrade_does_not_authorise_the_rollback(
    api: Api,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    clock: ManualClock,
) -> None:
    _signed_downgrade(api, operator_key, release_key, "1.5.0", 44)
    clock.set(datetime(2027, 11, 2, tzinfo=UTC))  # the test manifests expire on 2027-11-01
    refused = _roll_back(api, operator_key)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "rollback_not_signed"


def test_a_rollback_offers_the_signed_downgrade_and_revokes_the_bad_builds_tokens(
    api: Api,
    services: Services,
    at_0301: ManualClock,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    in_flight = _claim(api, agent).json()
    assert in_flight["release"]["version"] == "1.6.0"
    downgrade = _signed_downgrade(api, operator_key, release_key, "1.5.0", 44)

    rolled = _roll_back(api, operator_key)
    assert rolled.status_code == 200, rolled.text
    body = rolled.json()
    assert (body["from_version"], body["to_version"]) == ("1.6.0", "1.5.0")
    assert (body["to_manifest_version"], body["stage"], body["revoked_tokens"]) == (
        44,
        "everyone",
        1,
    )

    with api.client(agent.agent_key) as client:
        refused = client.get(in_flight["release"]["artifact_url"])
    assert refused.status_code == 403
    assert refused.json()["detail"]["code"] == "token_revoked"
    assert _offered(api, agent) == {"version": "1.5.0", "manifest_version": 44, **PAIR}
    at_0301.advance(minutes=1)
    again = _claim(api, agent)
    assert again.status_code == 200, again.text
    assert base64.b64decode(again.json()["release"]["manifest_b64"]) == downgrade.manifest

    entries = {
        (r.version, r.manifest_version): r
        for t in services.releases.list().tracks
        for r in t.releases
    }
    assert entries[("1.5.0", 44)].current
    assert entries[("1.6.0", 43)].withdrawn_reason == "rolled back to 1.5.0: 1.6.0 corrupts caches"


def test_a_rollback_is_in_the_trail_with_its_actor_and_reason(
    api: Api,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
) -> None:
    _signed_downgrade(api, operator_key, release_key, "1.5.0", 44)
    assert _roll_back(api, operator_key).status_code == 200
    with api.client(operator_key) as operator:
        trail = operator.get("/v1/admin/events", params={"kind": "release."}).json()["events"]
    latest = trail[0]
    assert latest["kind"] == "release.rolled_back"
    assert latest["actor"]["kind"] == "operator"
    assert latest["actor"]["id"] is not None
    assert latest["data"]["reason"] == "1.6.0 corrupts caches"
    assert (latest["data"]["version"], latest["data"]["to_version"]) == ("1.6.0", "1.5.0")


def test_the_previous_good_version_skips_withdrawn_and_halted_releases(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    operator_key: str,
) -> None:
    """1.4.0 good, 1.5.0 withdrawn, 1.5.5 halted, 1.6.0 current: the way back is to 1.4.0."""
    for version, manifest_version in (("1.4.0", 40), ("1.5.0", 41), ("1.5.5", 42), ("1.6.0", 43)):
        release = sign_release(release_key, version=version, manifest_version=manifest_version)
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now(), stage="everyone"
        )
    ids = {r.version: r.id for t in services.releases.list().tracks for r in t.releases}
    with api.client(operator_key) as operator:
        halted = operator.post(f"/v1/admin/releases/{ids['1.5.5']}/halt", json={"reason": "bad"})
        assert halted.status_code == 200, halted.text
    services.releases.withdraw(ids["1.5.0"], reason="bad", replacement="1.6.0", now=clock.now())
    refused = _roll_back(api, operator_key)
    assert refused.status_code == 409
    assert "--version 1.4.0" in refused.json()["detail"]["sign_command"]
    _signed_downgrade(api, operator_key, release_key, "1.4.0", 44)
    rolled = _roll_back(api, operator_key)
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["to_version"] == "1.4.0"


def test_the_previous_good_version_is_the_one_the_fleet_ran_not_a_canarys(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    operator_key: str,
) -> None:
    """1.4.0 reached everyone; 1.5.0 never left its first wave before 1.6.0 went to everyone:
    the way back is to 1.4.0, which the fleet ran, not to 1.5.0, which only canaries saw."""
    for version, manifest_version, stage in (
        ("1.4.0", 40, None),
        ("1.5.0", 41, None),
        ("1.6.0", 43, "everyone"),
    ):
        release = sign_release(release_key, version=version, manifest_version=manifest_version)
        published = services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now(), stage=stage
        )
        assert published.stage == ("canary" if version == "1.5.0" else "everyone")
    refused = _roll_back(api, operator_key)
    assert refused.status_code == 409
    assert "--version 1.4.0" in refused.json()["detail"]["sign_command"]
    _signed_downgrade(api, operator_key, release_key, "1.4.0", 44)
    rolled = _roll_back(api, operator_key)
    assert rolled.status_code == 200, rolled.text
    assert rolled.json()["to_version"] == "1.4.0"


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        pytest.param({"reason": ""}, 422, "reason", id="empty_reason"),
        pytest.param({"reason": "   "}, 422, "reason", id="blank_reason"),
        pytest.param({"to": "1.6.0"}, 422, "to", id="to_the_current_version"),
        pytest.param({"to": "1.9.0"}, 422, "to", id="to_a_newer_version"),
        pytest.param({"to": "1.0.0"}, 422, "to", id="to_a_version_never_published"),
        pytest.param({"to": "one"}, 422, "to", id="to_not_a_version"),
        pytest.param({"channel": "Stable!"}, 422, "channel", id="bad_channel"),
        pytest.param({"stage": "half"}, 422, "stage", id="bad_stage"),
    ],
)
def test_a_rollback_with_bad_input_is_refused_naming_the_field(
    api: Api,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    body: dict[str, Any],
    status: int,
    field: str,
) -> None:
    _signed_downgrade(api, operator_key, release_key, "1.5.0", 44)
    refused = _roll_back(api, operator_key, **body)
    assert refused.status_code == status, refused.text
    assert field in refused.text


def test_a_pair_without_a_release_has_nothing_to_roll_back(api: Api, operator_key: str) -> None:
    refused = _roll_back(api, operator_key)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "nothing_to_roll_back"


# -- the updater's own line --------------------------------------------------------------------


def _updater_release(
    api: Api, operator_key: str, key: Ed25519PrivateKey, version: str, manifest_version: int
) -> None:
    release = sign_release(
        key, version=version, manifest_version=manifest_version, product="updater"
    )
    answer = _publish(api, operator_key, release, stage="everyone")
    assert answer.status_code == 201, answer.text


def _config(api: Api, agent: Agent) -> dict[str, Any]:
    with api.client(agent.agent_key) as client:
        body: dict[str, Any] = client.get("/v1/agent/config").json()
    return body


def test_the_updaters_line_rolls_back_on_its_own(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """The updater 2.2.0 goes back to 2.1.0 through its own signed downgrade; the managed
    agent's 1.6.0 stays offered, and the refusal before the downgrade names the updater's
    commands."""
    agent = make_agent(make_org())
    _updater_release(api, operator_key, release_key, "2.1.0", 50)
    _updater_release(api, operator_key, release_key, "2.2.0", 51)
    assert _config(api, agent)["updater_release"]["version"] == "2.2.0"

    refused = _roll_back(api, operator_key, product="updater")
    assert refused.status_code == 409, refused.text
    detail = refused.json()["detail"]
    assert detail["code"] == "rollback_not_signed"
    assert "--product updater --version 2.1.0" in detail["sign_command"]
    assert "publish-release --product updater --allow-downgrade" in detail["publish_command"]
    assert "(updater)" in detail["message"]

    downgrade = sign_release(
        release_key, version="2.1.0", manifest_version=52, allow_downgrade=True, product="updater"
    )
    published = _publish(api, operator_key, downgrade, allow_downgrade=True, product="updater")
    assert published.status_code == 201, published.text
    rolled = _roll_back(api, operator_key, product="updater")
    assert rolled.status_code == 200, rolled.text
    assert (rolled.json()["from_version"], rolled.json()["to_version"]) == ("2.2.0", "2.1.0")
    assert rolled.json()["product"] == "updater"

    config = _config(api, agent)
    assert config["updater_release"]["manifest_version"] == 52
    assert config["release"]["version"] == "1.6.0"
    entries = {
        (r.version, r.manifest_version): r
        for t in services.releases.list().tracks
        for r in t.releases
    }
    assert entries[("1.6.0", 43)].withdrawn_reason is None
    assert entries[("2.2.0", 51)].withdrawn_reason is not None


def test_an_updater_downgrade_does_not_authorise_the_agents_rollback(
    api: Api,
    release_key: Ed25519PrivateKey,
    bad: SignedRelease,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """A signed downgrade of 1.5.0 exists, but for the updater: the managed agent's line has
    none, so its rollback is refused, and the updater's line is left as it was."""
    agent = make_agent(make_org())
    _updater_release(api, operator_key, release_key, "1.5.0", 50)
    _updater_release(api, operator_key, release_key, "1.6.0", 51)
    downgrade = sign_release(
        release_key, version="1.5.0", manifest_version=52, allow_downgrade=True, product="updater"
    )
    published = _publish(api, operator_key, downgrade, allow_downgrade=True, product="updater")
    assert published.status_code == 201, published.text
    before = _config(api, agent)

    refused = _roll_back(api, operator_key)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "rollback_not_signed"
    assert "--product" not in refused.json()["detail"]["sign_command"]
    assert _config(api, agent) == before


def test_a_rollback_of_an_unknown_product_is_refused_naming_the_field(
    api: Api, release_key: Ed25519PrivateKey, bad: SignedRelease, operator_key: str
) -> None:
    refused = _roll_back(api, operator_key, product="kernel")
    assert refused.status_code == 422, refused.text
    assert "product" in refused.text
