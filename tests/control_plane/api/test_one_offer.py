"""One offer for every path, over real HTTP against a real PostgreSQL: a manual update ("update
now") is offered what the config poll and a scheduled claim offer (the pin, the stage), and is
stopped by what stops them (the brake, a hold, a halt, the release's brake) unless an operator
forced it; the brake and a halt take back the tokens in flight, manual ones included; a stopped
release skips the slot once instead of being refused every minute.

Stable 1.5.0 (everyone) and 1.6.0 (canary) are published by `two_releases`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
import pytest

import control_plane.claims.services as claim_services
from control_plane.events.trail import Actor
from ground.contract import confirm_path
from tests.control_plane.api.conftest import AT_0301, SLOT, Rollout, TwoReleases
from tests.control_plane.conftest import Agent, Org

AFTERNOON = datetime(2026, 11, 30, 14, 7, tzinfo=UTC)


def _granted(answer: httpx.Response) -> dict[str, Any]:
    assert answer.status_code in (200, 201), answer.text
    body: dict[str, Any] = answer.json()
    return body


def _refused(answer: httpx.Response, status: int, code: str) -> None:
    assert answer.status_code == status, answer.text
    assert answer.json()["detail"]["code"] == code


def _update_now(rollout: Rollout, org: Org, agent: Agent) -> httpx.Response:
    return rollout.claim_manual(agent, rollout.request_manual(org, agent))


def _started(rollout: Rollout, run_id: str) -> dict[str, Any]:
    with rollout.pool.connection() as conn:
        row = conn.execute(
            "SELECT actor_kind, actor_name, data FROM events"
            " WHERE kind = 'update.started' AND run_id = %s",
            [run_id],
        ).fetchone()
    assert row is not None
    return dict(row)


def _download(rollout: Rollout, agent: Agent, grant: dict[str, Any]) -> httpx.Response:
    with rollout.api.client(agent.agent_key) as client:
        return client.get(grant["release"]["artifact_url"], headers={"Range": "bytes=0-9"})


def _confirm(rollout: Rollout, agent: Agent, grant: dict[str, Any]) -> httpx.Response:
    with rollout.api.client(agent.agent_key) as client:
        return client.post(confirm_path(grant["run_id"]))


def _force(rollout: Rollout, agent: Agent) -> str:
    forced = rollout.operator(
        "POST", f"/v1/admin/agents/{agent.agent_id}/forced-update", reason="support case 4711"
    )
    assert forced.status_code == 201, forced.text
    run_id: str = forced.json()["run_id"]
    return run_id


# -- the offer ------------------------------------------------------------------------------------


def test_update_now_of_an_agent_in_a_pinned_organisation_gets_the_pinned_version(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    assert rollout.promote("1.6.0").status_code == 200
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    pinned = rollout.operator(
        "PUT", f"/v1/admin/orgs/{org.org_id}/pin", version="1.5.0", reason="needs 1.5"
    )
    assert pinned.status_code == 200, pinned.text
    rollout.clock.set(AFTERNOON)
    assert rollout.config(agent)["release"]["version"] == "1.5.0"
    grant = _granted(_update_now(rollout, org, agent))
    assert grant["release"]["version"] == "1.5.0"
    assert _started(rollout, grant["run_id"])["data"]["offer"] == "pinned"


def test_update_now_during_the_canary_stage_gets_the_canary_build_only_on_a_canary(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    canary, other = rollout.make_agent(org, "canary-01"), rollout.make_agent(org, "web-01")
    assert rollout.mark_canary(canary).status_code == 200
    rollout.clock.set(AFTERNOON)
    assert _granted(_update_now(rollout, org, other))["release"]["version"] == "1.5.0"
    assert _granted(_update_now(rollout, org, canary))["release"]["version"] == "1.6.0"
    # The config poll offers each of them the same.
    assert rollout.config(other)["release"]["version"] == "1.5.0"
    assert rollout.config(canary)["release"]["version"] == "1.6.0"


def test_update_now_is_never_offered_a_withdrawn_release(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    assert rollout.promote("1.6.0").status_code == 200
    withdrawn = rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/withdraw", reason="broken"
    )
    assert withdrawn.status_code == 200, withdrawn.text
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(AFTERNOON)
    assert _granted(_update_now(rollout, org, agent))["release"]["version"] == "1.5.0"


def test_update_now_of_an_agent_pinned_to_a_version_without_a_release_is_refused(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    # A pin without a version holds the agent at the version it runs: none reported yet.
    pinned = rollout.operator("PUT", f"/v1/admin/agents/{agent.agent_id}/pin", reason="freeze")
    assert pinned.status_code == 200, pinned.text
    rollout.clock.set(AFTERNOON)
    refused = _update_now(rollout, org, agent)
    _refused(refused, 409, "no_release")
    assert "pinned" in refused.json()["detail"]["message"]


# -- the stops, and the force past them ----------------------------------------------------------


def test_update_now_of_a_held_agent_is_refused_unless_an_operator_forces_it(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(AFTERNOON)
    with rollout.api.client(org.panel_key) as panel:
        held = panel.put(
            f"/v1/agents/{agent.agent_id}/hold",
            json={"until": "2026-12-07T00:00:00Z", "reason": "month-end close"},
        )
    assert held.status_code == 200, held.text
    _refused(_update_now(rollout, org, agent), 409, "held")

    run_id = _force(rollout, agent)
    grant = _granted(rollout.claim_manual(agent, run_id))
    assert grant["release"]["version"] == "1.5.0"
    started = _started(rollout, run_id)
    assert (started["actor_kind"], started["data"]["forced"]) == ("operator", True)
    assert started["data"]["forced_reason"] == "support case 4711"


def test_a_forced_update_is_recorded_as_forced_and_an_ordinary_one_is_not(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(AFTERNOON)
    grant = _granted(_update_now(rollout, org, agent))
    started = _started(rollout, grant["run_id"])
    assert (started["actor_kind"], started["data"]["forced"]) == ("user", False)
    assert "forced_reason" not in started["data"]


# -- tokens in flight -----------------------------------------------------------------------------


def test_the_brake_takes_back_a_manual_token_in_flight_download_and_swap(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(AFTERNOON)
    grant = _granted(_update_now(rollout, org, agent))
    assert _download(rollout, agent, grant).status_code == 206
    braked = rollout.operator(
        "PUT", "/v1/admin/brake", engaged=True, reason="bad night", revoke_outstanding=True
    )
    assert braked.status_code == 200, braked.text
    assert braked.json()["revoked_tokens"] == 1
    _refused(_download(rollout, agent, grant), 403, "token_revoked")
    _refused(_confirm(rollout, agent, grant), 403, "token_revoked")


def test_a_halt_takes_back_a_manual_token_in_flight(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    assert rollout.mark_canary(agent).status_code == 200
    rollout.clock.set(AFTERNOON)
    grant = _granted(_update_now(rollout, org, agent))
    assert grant["release"]["version"] == "1.6.0"
    halted = rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/halt", reason="looks wrong"
    )
    assert halted.status_code == 200, halted.text
    _refused(_download(rollout, agent, grant), 403, "token_revoked")
    _refused(_confirm(rollout, agent, grant), 403, "token_revoked")


def test_a_forced_update_in_flight_survives_the_brake_and_a_halt(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    assert rollout.mark_canary(agent).status_code == 200
    rollout.clock.set(AFTERNOON)
    grant = _granted(rollout.claim_manual(agent, _force(rollout, agent)))
    rollout.operator(
        "PUT", "/v1/admin/brake", engaged=True, reason="bad night", revoke_outstanding=True
    )
    rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/halt", reason="looks wrong"
    )
    assert _download(rollout, agent, grant).status_code == 206
    assert _confirm(rollout, agent, grant).status_code == 200


# -- a stopped release is nothing to do tonight --------------------------------------------------


def _skipped_runs(rollout: Rollout, agent: Agent) -> list[tuple[str, str | None]]:
    with rollout.pool.connection() as conn:
        rows = conn.execute(
            "SELECT status, skip_reason FROM runs WHERE agent_id = %s", [agent.agent_id]
        ).fetchall()
    return [(row["status"], row["skip_reason"]) for row in rows]


def _stopped_by(rollout: Rollout, agent: Agent) -> tuple[str | None, object]:
    """What the skipped run and its `update.skipped` event say stopped the release."""
    with rollout.pool.connection() as conn:
        row = conn.execute(
            "SELECT r.stopped_by, e.data FROM runs r"
            " JOIN events e ON e.run_id = r.id AND e.kind = 'update.skipped'"
            " WHERE r.agent_id = %s",
            [agent.agent_id],
        ).fetchone()
    assert row is not None
    return row["stopped_by"], row["data"].get("stopped_by")


def test_a_halted_release_skips_the_slot_once_and_the_agent_stops_asking(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    assert rollout.mark_canary(agent).status_code == 200
    rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.6.0')}/halt", reason="looks wrong"
    )
    rollout.clock.set(AT_0301)
    _refused(rollout.claim(agent), 409, "release_halted")
    assert _skipped_runs(rollout, agent) == [("skipped", "release_halted")]
    # An agent that does not know the refusal consumes the slot asks once more: the same answer
    # (the halt comes before the slot's run), and the slot stays skipped once.
    rollout.clock.advance(minutes=1)
    _refused(rollout.claim(agent), 409, "release_halted")
    assert len(_skipped_runs(rollout, agent)) == 1
    with rollout.api.client(org.panel_key) as panel:
        (run,) = panel.get(f"/v1/agents/{agent.agent_id}/runs").json()["runs"]
    assert (run["slot_key"], run["status"], run["skip_reason"], run["stopped_by"]) == (
        SLOT,
        "skipped",
        "release_halted",
        "halt",
    )
    assert _stopped_by(rollout, agent) == ("halt", "halt")


def test_a_halt_between_the_claims_check_and_its_grant_skips_the_slot_all_the_same(
    rollout: Rollout, two_releases: TwoReleases, monkeypatch: pytest.MonkeyPatch
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    read = claim_services.offered_releases

    def halted_right_after(*args: Any, **kwargs: Any) -> Any:
        offered = read(*args, **kwargs)
        _, release = offered[UUID(agent.agent_id)]
        rollout.services.rollout.halt(
            release.release_id,
            reason="halted meanwhile",
            actor=Actor(kind="operator", name="tests"),
            now=rollout.clock.now(),
        )
        return offered

    monkeypatch.setattr(claim_services, "offered_releases", halted_right_after)
    rollout.clock.set(AT_0301)
    _refused(rollout.claim(agent, from_version="1.4.1"), 409, "release_halted")
    assert _skipped_runs(rollout, agent) == [("skipped", "release_halted")]
    # Found by the grant's lock, not by the facts: still known to be a halt.
    assert _stopped_by(rollout, agent) == ("halt", "halt")


def test_a_release_under_its_own_brake_skips_the_slot_the_same_way(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    braked = rollout.operator(
        "PUT",
        f"/v1/admin/releases/{rollout.release_id('1.5.0')}/brake",
        engaged=True,
        reason="stop 1.5.0",
    )
    assert braked.status_code == 200, braked.text
    rollout.clock.set(AT_0301)
    _refused(rollout.claim(agent, from_version="1.4.1"), 409, "release_halted")
    assert _skipped_runs(rollout, agent) == [("skipped", "release_halted")]
    # The agent's answer is the same; the run and its event keep that it was the brake.
    assert _stopped_by(rollout, agent) == ("brake", "brake")


def test_the_platform_brake_still_consumes_nothing(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    # No share: the agent is offered 1.5.0 whatever its id (else one in twenty is a canary).
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.operator("PUT", "/v1/admin/brake", engaged=True, reason="bad night")
    rollout.clock.set(AT_0301)
    _refused(rollout.claim(agent, from_version="1.4.1"), 503, "brake")
    assert _skipped_runs(rollout, agent) == []
    # Released inside the window, the same slot is served.
    rollout.operator("PUT", "/v1/admin/brake", engaged=False)
    rollout.clock.advance(minutes=1)
    assert _granted(rollout.claim(agent, from_version="1.4.1"))["release"]["version"] == "1.5.0"
