"""The rollout's guards (issue 14), each with the input it exists to stop: settings out of
bounds, a rate threshold that a count alone would pass, promoting or halting the wrong release,
a forced update without a reason, pins' precedence, the pair an agent only polls for.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from nachtwacht.worlds.clocks import ManualClock
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release

SLOT = "2026-11-30T03:00"
AT_0301 = datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC)


@pytest.fixture
def two_releases(
    services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> tuple[SignedRelease, SignedRelease]:
    """Stable 1.5.0 (everyone), then 1.6.0 (canary)."""
    old = sign_release(release_key, version="1.5.0", manifest_version=42)
    new = sign_release(release_key, version="1.6.0", manifest_version=43)
    for release in (old, new):
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now()
        )
    return old, new


def _release_id(services: Services, version: str) -> str:
    for track in services.releases.list().tracks:
        for entry in track.releases:
            if entry.version == version:
                return str(entry.id)
    raise AssertionError(f"no release {version}")


def _operator(api: Api, key: str, method: str, path: str, **body: Any) -> httpx.Response:
    with api.client(key) as operator:
        return operator.request(method, path, json=body or None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("canary_share_percent", 101, id="share_over_100"),
        pytest.param("canary_share_percent", -1, id="share_negative"),
        pytest.param("halt_failures", 0, id="zero_failures_would_halt_everything"),
        pytest.param("halt_rate_percent", 0, id="zero_rate"),
        pytest.param("soak_minutes", 20161, id="soak_over_two_weeks"),
        pytest.param("halt_window_minutes", "60", id="a_string"),
        pytest.param("soak_minutes", True, id="a_boolean"),
    ],
)
def test_rollout_settings_out_of_bounds_are_refused_naming_the_field(
    api: Api, operator_key: str, field: str, value: object
) -> None:
    refused = _operator(api, operator_key, "PATCH", "/v1/admin/rollout/settings", **{field: value})
    assert refused.status_code == 422
    assert field in refused.text
    unchanged = _operator(api, operator_key, "GET", "/v1/admin/rollout/settings").json()
    assert unchanged == {
        "canary_share_percent": 5,
        "soak_minutes": 720,
        "halt_failures": 3,
        "halt_rate_percent": 20,
        "halt_window_minutes": 360,
    }


def test_failures_below_the_rate_do_not_halt_a_release(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """Three failures pass the count, but three of twelve is 25 %: below a 50 % rate."""
    release_id = _release_id(services, "1.6.0")
    _operator(
        api,
        operator_key,
        "POST",
        f"/v1/admin/releases/{release_id}/promote",
        reason="canaries fine",
    )
    _operator(
        api, operator_key, "PATCH", "/v1/admin/rollout/settings",
        halt_failures=3, halt_rate_percent=50,
    )  # fmt: skip
    org = make_org()
    clock.set(AT_0301)
    _operator(api, operator_key, "PUT", "/v1/admin/settings", org_cap=25, global_cap=25)
    for n in range(12):
        agent = make_agent(org, f"web-{n:02d}")
        with api.client(agent.agent_key) as client:
            grant = client.post("/v1/agent/claims", json={"slot_key": SLOT}).json()
            status = "failed" if n < 3 else "succeeded"
            client.patch(
                f"/v1/agent/runs/{grant['run_id']}", json={"status": status, "version": "1.6.0"}
            )
    assert services.rollout.advance(clock.now()).halts == ()
    _operator(api, operator_key, "PATCH", "/v1/admin/rollout/settings", halt_rate_percent=25)
    assert len(services.rollout.advance(clock.now()).halts) == 1


def test_promoting_or_halting_the_wrong_release_is_a_conflict(
    api: Api,
    services: Services,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
) -> None:
    everyone, canary = _release_id(services, "1.5.0"), _release_id(services, "1.6.0")
    already = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{everyone}/promote", reason="canaries fine"
    )
    assert already.status_code == 409
    assert already.json()["detail"]["code"] == "release_not_canary"
    halted = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{canary}/halt", reason="looks wrong"
    )
    assert halted.status_code == 200
    assert halted.json()["cause"] == "operator"
    twice = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{canary}/halt", reason="again"
    )
    assert twice.json()["detail"]["code"] == "release_halted"
    promote_halted = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{canary}/promote", reason="canaries fine"
    )
    assert promote_halted.status_code == 409
    # A halt by hand leaves no notice: the operator knows.
    assert _operator(api, operator_key, "GET", "/v1/admin/notices").json() == {"notices": []}
    not_halted = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{everyone}/resume", reason="?"
    )
    assert not_halted.json()["detail"]["code"] == "release_not_halted"
    unknown = _operator(
        api,
        operator_key,
        "POST",
        "/v1/admin/releases/00000000-0000-4000-8000-000000000000/halt",
        reason="x",
    )
    assert unknown.status_code == 404


def test_a_forced_update_needs_a_reason(
    api: Api, operator_key: str, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent(make_org())
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        refused = _operator(
            api, operator_key, "POST", f"/v1/admin/agents/{agent.agent_id}/forced-update", **body
        )
        assert refused.status_code == 422, body


def test_an_agents_own_pin_wins_over_its_organisations_and_none_holds_it_where_it_is(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    _operator(
        api,
        operator_key,
        "POST",
        f"/v1/admin/releases/{_release_id(services, '1.6.0')}/promote",
        reason="canaries fine",
    )
    org = make_org()
    agent, neighbour = make_agent(org, "db-01"), make_agent(org, "db-02")
    _operator(api, operator_key, "PUT", f"/v1/admin/orgs/{org.org_id}/pin", version="1.5.0")
    clock.set(AT_0301)
    with api.client(agent.agent_key) as client:
        grant = client.post("/v1/agent/claims", json={"slot_key": SLOT}).json()
        client.patch(
            f"/v1/agent/runs/{grant['run_id']}", json={"status": "succeeded", "version": "1.5.0"}
        )
    # The agent's own pin, "where it is" (no version): it runs 1.5.0, so it is offered 1.5.0.
    own = _operator(
        api, operator_key, "PUT", f"/v1/admin/agents/{agent.agent_id}/pin", version=None
    )
    assert own.status_code == 200
    assert own.json()["version"] is None
    _operator(api, operator_key, "DELETE", f"/v1/admin/orgs/{org.org_id}/pin")
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/agent/config").json()["release"]["version"] == "1.5.0"
    with api.client(neighbour.agent_key) as client:
        assert client.get("/v1/agent/config").json()["release"]["version"] == "1.6.0"
    pins = _operator(api, operator_key, "GET", "/v1/admin/pins").json()["pins"]
    assert [(pin["agent_id"], pin["version"]) for pin in pins] == [(agent.agent_id, None)]
    twice = _operator(api, operator_key, "DELETE", f"/v1/admin/orgs/{org.org_id}/pin")
    assert twice.status_code == 404


def test_the_panel_shows_the_pair_an_agent_only_polls_for(
    api: Api,
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    arm = sign_release(release_key, version="1.5.0", manifest_version=42, platform="linux-aarch64")
    services.releases.publish(arm.manifest, arm.signature, arm.artifact, now=clock.now())
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as panel:
        before = panel.get(f"/v1/agents/{agent.agent_id}/release").json()
    assert before["track_seen"] is False
    with api.client(agent.agent_key) as client:
        client.get("/v1/agent/config", params={"platform": "linux-aarch64"})
    with api.client(org.panel_key) as panel:
        after = panel.get(f"/v1/agents/{agent.agent_id}/release").json()
    assert after["track"] == {"channel": "stable", "platform": "linux-aarch64"}
    assert after["offered"]["version"] == "1.5.0"
    assert after["basis"] == "current"


def test_the_customer_ends_a_hold_an_operator_set(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    clock.set(AT_0301)
    held = _operator(
        api, operator_key, "PUT", f"/v1/admin/agents/{agent.agent_id}/hold",
        until="2026-12-01T00:00:00Z", reason="incident 12",
    )  # fmt: skip
    assert held.json()["set_by"] == "operator"
    with api.client(org.panel_key) as panel:
        assert panel.delete(f"/v1/agents/{agent.agent_id}/hold").status_code == 204
        page = panel.get(f"/v1/agents/{agent.agent_id}/release").json()
    assert page["hold"] is None
