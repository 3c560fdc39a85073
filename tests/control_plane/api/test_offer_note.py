"""The config says why an agent is not updated to its pair's newest release (`offer_note`): a
pin, a hold, a halt, the brake (the platform's or the release's), or a rollout stage that has
not reached it; and says nothing when nothing stands in the way."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from tests.control_plane.api.conftest import Rollout, TwoReleases

pytestmark = pytest.mark.usefixtures("two_releases", "no_share")


def note(rollout: Rollout, *, canary: bool = True, **pin: Any) -> dict[str, Any] | None:
    """The offer note of a new agent (a canary of 1.6.0 unless told otherwise)."""
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    if canary:
        assert rollout.mark_canary(agent).status_code == 200
    if pin:
        scope = f"/v1/admin/orgs/{org.org_id}/pin"
        assert rollout.operator("PUT", scope, **pin).status_code == 200
    found: dict[str, Any] | None = rollout.config(agent)["offer_note"]
    return found


def test_a_canary_with_nothing_in_its_way_has_no_note(rollout: Rollout) -> None:
    assert note(rollout) is None


def test_waiting_for_the_canary_stage_to_end_is_a_wave(rollout: Rollout) -> None:
    assert note(rollout, canary=False) == {
        "reason": "wave",
        "newest_version": "1.6.0",
        "detail": None,
    }


def test_after_the_promotion_nobody_waits(rollout: Rollout) -> None:
    assert rollout.promote("1.6.0").status_code == 200
    assert note(rollout, canary=False) is None


def test_a_pin_to_an_older_version_is_the_reason(rollout: Rollout) -> None:
    assert note(rollout, version="1.5.0", reason="freeze") == {
        "reason": "pinned",
        "newest_version": "1.6.0",
        "detail": None,
    }


def test_a_pin_to_the_newest_is_no_reason(rollout: Rollout) -> None:
    assert note(rollout, version="1.6.0") is None


def test_a_halt_of_the_newest_is_the_reason_with_its_words(rollout: Rollout) -> None:
    halted = rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/halt", reason="disk fills"
    )
    assert halted.status_code == 200, halted.text
    assert note(rollout) == {"reason": "halted", "newest_version": "1.6.0", "detail": "disk fills"}
    resumed = rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/resume", reason="fixed"
    )
    assert resumed.status_code == 200, resumed.text
    assert note(rollout) is None


def test_the_release_brake_and_the_platform_brake_are_the_reason(rollout: Rollout) -> None:
    release = rollout.release_id("1.6.0")
    braked = rollout.operator(
        "PUT", f"/v1/admin/releases/{release}/brake", engaged=True, reason="one bad build"
    )
    assert braked.status_code == 200, braked.text
    assert note(rollout) == {
        "reason": "braked",
        "newest_version": "1.6.0",
        "detail": "one bad build",
    }
    rollout.operator("PUT", f"/v1/admin/releases/{release}/brake", engaged=False)
    engaged = rollout.operator("PUT", "/v1/admin/brake", engaged=True, reason="bad night")
    assert engaged.status_code == 200, engaged.text
    assert note(rollout) == {"reason": "braked", "newest_version": "1.6.0", "detail": "bad night"}


def test_a_hold_is_the_reason_with_its_words(rollout: Rollout) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.mark_canary(agent)
    until = (rollout.clock.now() + timedelta(days=2)).isoformat()
    with rollout.api.client(org.panel_key) as panel:
        held = panel.put(
            f"/v1/agents/{agent.agent_id}/hold", json={"until": until, "reason": "audit"}
        )
    assert held.status_code == 200, held.text
    assert rollout.config(agent)["offer_note"] == {
        "reason": "held",
        "newest_version": "1.6.0",
        "detail": "audit",
    }


def test_the_note_changes_the_etag(rollout: Rollout, two_releases: TwoReleases) -> None:
    del two_releases
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.mark_canary(agent)
    with rollout.api.client(agent.agent_key) as client:
        before = client.get("/v1/agent/config")
        rollout.operator(
            "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/halt", reason="stop"
        )
        after = client.get("/v1/agent/config", headers={"If-None-Match": before.headers["ETag"]})
    assert after.status_code == 200
    assert after.json()["offer_note"]["reason"] == "halted"
