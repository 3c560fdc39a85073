"""Outcome reports that name `window_closed` (or `token_revoked`) where they cannot be true: the
reason says the control plane stopped the update before its switch, so only a run that ended
`failed` is excused from the release's halt. A run that switched and rolled back says something
of the build whatever reason it carries.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

import re

import pytest

from tests.control_plane.api.conftest import AT_0301, Rollout, TwoReleases


@pytest.mark.parametrize("reason", ["token_revoked", "window_closed"])
def test_rollbacks_naming_a_control_plane_reason_still_halt_the_release(
    rollout: Rollout, two_releases: TwoReleases, reason: str
) -> None:
    rollout.settings(halt_failures=3, halt_rate_percent=50)
    for agent, run_id in rollout.granted_to_everyone(4)[:3]:
        rollout.report(agent, run_id, "rolled_back", "1.5.0", reason=reason)
    halts = rollout.services.rollout.advance(rollout.clock.now()).halts
    assert len(halts) == 1


def test_successes_naming_window_closed_still_count_as_finished_runs(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    """Three failures of the build among six finished runs is 50 %, under a 60 % threshold: the
    three successes whose report also named `window_closed` switched, and are not left out."""
    rollout.settings(halt_failures=3, halt_rate_percent=60)
    granted = rollout.granted_to_everyone(6)
    for agent, run_id in granted[:3]:
        rollout.report(agent, run_id, "succeeded", "1.6.0", reason="window_closed")
    for agent, run_id in granted[3:]:
        rollout.report(agent, run_id, "failed", "1.5.0")
    assert rollout.services.rollout.advance(rollout.clock.now()).halts == ()


@pytest.mark.parametrize(
    "reason",
    [
        pytest.param(5, id="number"),
        pytest.param(["window_closed"], id="list"),
        pytest.param({"code": "window_closed"}, id="object"),
        pytest.param("WINDOW_CLOSED", id="upper_case"),
        pytest.param("window_closed ", id="trailing_space"),
        pytest.param("", id="empty"),
    ],
)
def test_a_reason_that_is_not_one_of_the_contract_s_is_refused_and_the_run_stays_claimed(
    rollout: Rollout, two_releases: TwoReleases, reason: object
) -> None:
    org = rollout.make_org()
    rollout.clock.set(AT_0301)
    agent = rollout.make_agent(org)
    grant = rollout.claim(agent, from_version=None).json()
    with rollout.api.client(agent.agent_key) as client:
        answer = client.patch(
            f"/v1/agent/runs/{grant['run_id']}",
            json={"status": "failed", "version": "1.5.0", "reason": reason},
        )
    assert answer.status_code == 422, answer.text
    assert "reason" in answer.json()["detail"]["message"]
    assert "Traceback" not in answer.text
    with rollout.pool.connection() as conn:
        row = conn.execute(
            "SELECT status, outcome_reason FROM runs WHERE id = %s", [grant["run_id"]]
        ).fetchone()
    assert row == {"status": "claimed", "outcome_reason": None}


def _window_closed_series(rollout: Rollout, release_id: str) -> dict[str, float]:
    text = rollout.operator("GET", "/metrics").text
    return {
        m["outcome"]: float(m["value"])
        for m in re.finditer(
            r"^nachtwacht_release_outcomes_total\{[^}]*outcome=\"(?P<outcome>\w+)\",[^}]*"
            r"reason=\"window_closed\",release=\"(?P<release>[-0-9a-f]+)\"[^}]*\} (?P<value>\S+)$",
            text,
            re.MULTILINE,
        )
        if m["release"] == release_id
    }


def test_the_window_closed_series_is_there_from_0_and_counts_a_refused_outcome(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    assert rollout.promote("1.6.0").status_code == 200
    release_id = rollout.release_id("1.6.0")
    org = rollout.make_org()
    rollout.clock.set(AT_0301)
    agent = rollout.make_agent(org)
    grant = rollout.claim(agent, from_version=None).json()
    assert _window_closed_series(rollout, release_id) == {
        "failed": 0,
        "rolled_back": 0,
        "refused": 0,
    }
    with rollout.api.client(agent.agent_key) as client:
        answer = client.patch(
            f"/v1/agent/runs/{grant['run_id']}",
            json={"status": "failed", "version": "1.5.0", "reason": "window_closed"},
        )
    assert answer.status_code == 200, answer.text
    assert _window_closed_series(rollout, release_id) == {
        "failed": 0,
        "rolled_back": 0,
        "refused": 1,
    }
