"""The rollout's guards, each with the input it exists to stop: settings out of
bounds, a rate threshold that a count alone would pass, promoting or halting the wrong release,
a forced update without a reason, pins' precedence, the pair an agent only polls for.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor
from tests.control_plane.api.conftest import AT_0301, ROLLOUT_SETTINGS, Rollout, TwoReleases
from tests.control_plane.conftest import sign_release


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
    rollout: Rollout, field: str, value: object
) -> None:
    refused = rollout.operator("PATCH", ROLLOUT_SETTINGS, **{field: value})
    assert refused.status_code == 422
    assert field in refused.text
    unchanged = rollout.operator("GET", ROLLOUT_SETTINGS).json()
    assert unchanged == DEFAULT_SETTINGS


def _wave(position: int, share: int, *, canaries: bool = False) -> dict[str, object]:
    return {
        "position": position,
        "share_percent": share,
        "canaries": canaries,
        "soak_minutes": None,
        "halt_failures": None,
        "halt_rate_percent": None,
    }


DEFAULT_SETTINGS = {
    "canary_share_percent": 5,
    "soak_minutes": 720,
    "halt_failures": 3,
    "halt_rate_percent": 20,
    "halt_window_minutes": 360,
    # Canaries → 10 % → 50 % → everyone; each wave's soak and threshold are the settings'.
    "waves": [_wave(1, 5, canaries=True), _wave(2, 10), _wave(3, 50), _wave(4, 100)],
}


@pytest.mark.parametrize(
    ("waves", "field"),
    [
        pytest.param([], "waves", id="no_wave"),
        pytest.param([{"share_percent": 100}] * 11, "waves", id="eleven_waves"),
        pytest.param(
            [{"share_percent": 10}, {"share_percent": 50}], "share_percent", id="last_not_everyone"
        ),
        pytest.param(
            [{"share_percent": 0}, {"share_percent": 100}],
            "waves[0].share_percent",
            id="a_wave_reaching_nobody",
        ),
        pytest.param(
            [{"share_percent": 50}, {"share_percent": 10}, {"share_percent": 100}],
            "waves[1].share_percent",
            id="a_shrinking_share",
        ),
        pytest.param(
            [{"share_percent": 5}, {"share_percent": 5}, {"share_percent": 100}],
            "waves[1].share_percent",
            id="the_same_share_again",
        ),
        pytest.param(
            [
                {"share_percent": 10, "canaries": True},
                {"share_percent": 10, "canaries": True},
                {"share_percent": 100},
            ],
            "waves[1].share_percent",
            id="the_canaries_again",
        ),
        pytest.param(
            [{"share_percent": 10, "soak_minutes": 20161}, {"share_percent": 100}],
            "soak_minutes",
            id="soak_over_two_weeks",
        ),
        pytest.param(
            [{"share_percent": 10, "halt_failures": 0}, {"share_percent": 100}],
            "halt_failures",
            id="a_wave_halting_on_no_failure",
        ),
        pytest.param(
            [{"share_percent": 10, "reach": "all"}, {"share_percent": 100}],
            "reach",
            id="an_unknown_field",
        ),
    ],
)
def test_a_plan_of_waves_that_cannot_roll_out_is_refused_naming_the_field(
    rollout: Rollout, waves: list[dict[str, object]], field: str
) -> None:
    refused = rollout.operator("PATCH", ROLLOUT_SETTINGS, waves=waves)
    assert refused.status_code == 422, refused.text
    assert field in refused.text
    assert rollout.operator("GET", ROLLOUT_SETTINGS).json() == DEFAULT_SETTINGS


@pytest.mark.parametrize(
    "waves",
    [
        pytest.param(
            [
                {"share_percent": 10},
                {"share_percent": 10, "canaries": True},
                {"share_percent": 100},
            ],
            id="the_canaries_first_in_wave_2",
        ),
        pytest.param([{"share_percent": 100}, {"share_percent": 100}], id="everyone_then_everyone"),
    ],
)
def test_a_wave_that_reaches_someone_new_is_taken(
    rollout: Rollout, waves: list[dict[str, object]]
) -> None:
    taken = rollout.operator("PATCH", ROLLOUT_SETTINGS, waves=waves)
    assert taken.status_code == 200, taken.text


def test_a_first_share_that_leaves_wave_2_nobody_new_is_refused(rollout: Rollout) -> None:
    refused = rollout.operator("PATCH", ROLLOUT_SETTINGS, canary_share_percent=60)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert (detail["field"], detail["value"]) == ("canary_share_percent", 60)
    assert "wave 2's share (10 %)" in detail["message"]
    assert rollout.operator("GET", ROLLOUT_SETTINGS).json() == DEFAULT_SETTINGS
    taken = rollout.operator("PATCH", ROLLOUT_SETTINGS, canary_share_percent=9)
    assert taken.status_code == 200, taken.text


def test_a_plan_is_checked_by_the_service_too(rollout: Rollout) -> None:
    """What never passed the API's model (a caller of the service) meets the same rules."""
    for waves, field in (
        ([{"share_percent": 0}, {"share_percent": 100}], "waves[0].share_percent"),
        ([{"share_percent": 10}, {"share_percent": 99}], "waves[1].share_percent"),
        ("everyone", "waves"),
        ([{"share_percent": True}, {"share_percent": 100}], "waves[0].share_percent"),
        ([{"share_percent": 10, "canaries": "yes"}, {"share_percent": 100}], "waves[0].canaries"),
    ):
        with pytest.raises(InvalidInput) as refused:
            rollout.services.rollout.update_settings(
                {"waves": waves}, actor=Actor(kind="operator"), now=rollout.clock.now()
            )
        assert refused.value.fields["field"] == field


def test_promoting_to_a_wave_that_is_not_later_is_refused(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    path = f"/v1/admin/releases/{rollout.release_id('1.6.0')}/promote"
    assert rollout.operator("POST", path, reason="next", wave=2).status_code == 200
    for wave in (2, 1, 5):
        refused = rollout.operator("POST", path, reason="again", wave=wave)
        assert refused.status_code == 422, refused.text
        assert "wave" in refused.text
    assert rollout.operator("POST", path, reason="on", wave=3).json()["stage"] == "canary"
    assert rollout.operator("POST", path, reason="all", wave=4).json()["stage"] == "everyone"


def test_failures_below_the_rate_do_not_halt_a_release(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    """Three failures pass the count, but three of twelve is 25 %: below a 50 % rate."""
    assert rollout.promote("1.6.0").status_code == 200
    rollout.settings(halt_failures=3, halt_rate_percent=50)
    org = rollout.make_org()
    rollout.clock.set(AT_0301)
    rollout.operator("PUT", "/v1/admin/settings", org_cap=25, global_cap=25)
    for n in range(12):
        agent = rollout.make_agent(org, f"web-{n:02d}")
        grant = rollout.claim(agent, from_version=None).json()
        rollout.report(agent, grant["run_id"], "failed" if n < 3 else "succeeded", "1.6.0")
    assert rollout.services.rollout.advance(rollout.clock.now()).halts == ()
    rollout.settings(halt_rate_percent=25)
    assert len(rollout.services.rollout.advance(rollout.clock.now()).halts) == 1


def test_promoting_or_halting_the_wrong_release_is_a_conflict(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    everyone, canary = rollout.release_id("1.5.0"), rollout.release_id("1.6.0")
    already = rollout.promote("1.5.0")
    assert already.status_code == 409
    assert already.json()["detail"]["code"] == "release_not_canary"
    halted = rollout.operator("POST", f"/v1/admin/releases/{canary}/halt", reason="looks wrong")
    assert halted.status_code == 200
    assert halted.json()["cause"] == "operator"
    twice = rollout.operator("POST", f"/v1/admin/releases/{canary}/halt", reason="again")
    assert twice.json()["detail"]["code"] == "release_halted"
    promote_halted = rollout.promote("1.6.0")
    assert promote_halted.status_code == 409
    # A halt by hand leaves no notice: the operator knows.
    assert rollout.operator("GET", "/v1/admin/notices").json() == {"notices": []}
    not_halted = rollout.operator("POST", f"/v1/admin/releases/{everyone}/resume", reason="?")
    assert not_halted.json()["detail"]["code"] == "release_not_halted"
    unknown = rollout.operator(
        "POST",
        "/v1/admin/releases/00000000-0000-4000-8000-000000000000/halt",
        reason="x",
    )
    assert unknown.status_code == 404


def test_a_forced_update_needs_a_reason(rollout: Rollout) -> None:
    agent = rollout.make_agent(rollout.make_org())
    for body in ({}, {"reason": ""}, {"reason": "   "}):
        refused = rollout.operator(
            "POST", f"/v1/admin/agents/{agent.agent_id}/forced-update", **body
        )
        assert refused.status_code == 422, body


def test_an_agents_own_pin_wins_over_its_organisations_and_none_holds_it_where_it_is(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    assert rollout.promote("1.6.0").status_code == 200
    org = rollout.make_org()
    agent, neighbour = rollout.make_agent(org, "db-01"), rollout.make_agent(org, "db-02")
    rollout.operator("PUT", f"/v1/admin/orgs/{org.org_id}/pin", version="1.5.0")
    rollout.clock.set(AT_0301)
    grant = rollout.claim(agent, from_version=None).json()
    rollout.report(agent, grant["run_id"], "succeeded", "1.5.0")
    # The agent's own pin, "where it is" (no version): it runs 1.5.0, so it is offered 1.5.0.
    own = rollout.operator("PUT", f"/v1/admin/agents/{agent.agent_id}/pin", version=None)
    assert own.status_code == 200
    assert own.json()["version"] is None
    rollout.operator("DELETE", f"/v1/admin/orgs/{org.org_id}/pin")
    assert rollout.config(agent)["release"]["version"] == "1.5.0"
    assert rollout.config(neighbour)["release"]["version"] == "1.6.0"
    pins = rollout.operator("GET", "/v1/admin/pins").json()["pins"]
    assert [(pin["agent_id"], pin["version"]) for pin in pins] == [(agent.agent_id, None)]
    twice = rollout.operator("DELETE", f"/v1/admin/orgs/{org.org_id}/pin")
    assert twice.status_code == 404


def test_the_panel_shows_the_pair_an_agent_only_polls_for(
    rollout: Rollout, release_key: Ed25519PrivateKey
) -> None:
    arm = sign_release(release_key, version="1.5.0", manifest_version=42, platform="linux-aarch64")
    rollout.services.releases.publish(
        arm.manifest, arm.signature, arm.artifact, now=rollout.clock.now()
    )
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    with rollout.api.client(org.panel_key) as panel:
        before = panel.get(f"/v1/agents/{agent.agent_id}/release").json()
    assert before["track_seen"] is False
    with rollout.api.client(agent.agent_key) as client:
        client.get("/v1/agent/config", params={"platform": "linux-aarch64"})
    with rollout.api.client(org.panel_key) as panel:
        after = panel.get(f"/v1/agents/{agent.agent_id}/release").json()
    assert after["track"] == {"channel": "stable", "platform": "linux-aarch64"}
    assert after["offered"]["version"] == "1.5.0"
    assert after["basis"] == "current"


def test_the_customer_ends_a_hold_an_operator_set(rollout: Rollout) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(AT_0301)
    held = rollout.operator(
        "PUT",
        f"/v1/admin/agents/{agent.agent_id}/hold",
        until="2026-12-01T00:00:00Z",
        reason="incident 12",
    )
    assert held.json()["set_by"] == "operator"
    with rollout.api.client(org.panel_key) as panel:
        assert panel.delete(f"/v1/agents/{agent.agent_id}/hold").status_code == 204
        page = panel.get(f"/v1/agents/{agent.agent_id}/release").json()
    assert page["hold"] is None


UNKNOWN_RELEASE = "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize(
    ("method", "action", "body"),
    [
        pytest.param("POST", "halt", {"reason": "x"}, id="halt"),
        pytest.param("POST", "resume", {"reason": "x"}, id="resume"),
        pytest.param("POST", "promote", {"reason": "x"}, id="promote"),
        pytest.param("GET", "halts", {}, id="halts"),
        pytest.param("PUT", "brake", {"engaged": True, "reason": "x"}, id="release_brake"),
        pytest.param("POST", "withdraw", {"reason": "x"}, id="withdraw"),
    ],
)
def test_every_action_on_an_unknown_release_is_refused_as_release_not_found(
    rollout: Rollout, method: str, action: str, body: dict[str, object]
) -> None:
    """One refusal for a release that does not exist, whichever action names it — never an
    empty list of halts, never a 500 from a missing row."""
    unknown = rollout.operator(method, f"/v1/admin/releases/{UNKNOWN_RELEASE}/{action}", **body)
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["detail"]["code"] == "release_not_found"


@pytest.mark.parametrize(
    "reason", ["token_revoked", "window_closed", "platform_unavailable", "download_failed"]
)
def test_updates_the_control_plane_stopped_do_not_halt_a_release(
    rollout: Rollout, two_releases: TwoReleases, reason: str
) -> None:
    """Failures whose token was revoked (the brake, a halt, a withdrawal), whose switch was
    refused because the window had closed, that the control plane could not serve until the
    window closed (an outage), or whose build never came (a download cut, a captive portal's page
    where the build was expected) say nothing of the build: three of them pass neither the count
    nor the rate; three failures of its own do."""
    rollout.settings(halt_failures=3, halt_rate_percent=50)
    granted = rollout.granted_to_everyone(6)
    for agent, run_id in granted[:3]:
        rollout.report(agent, run_id, "failed", "1.5.0", reason=reason)
    assert rollout.services.rollout.advance(rollout.clock.now()).halts == ()
    for agent, run_id in granted[3:]:
        rollout.report(agent, run_id, "failed", "1.5.0")
    assert len(rollout.services.rollout.advance(rollout.clock.now()).halts) == 1
