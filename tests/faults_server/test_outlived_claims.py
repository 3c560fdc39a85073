"""A claim never outlives its window: the run a full state directory (or a daemon
that never came back) left `claimed` is ended by the worker, and a late report still says what
really happened."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from control_plane.claims.grant import TOKEN_LIFETIME
from control_plane.reconcile.outlived import OUTLIVED_MARGIN
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import AnswerCode, run_path
from tests.control_plane.conftest import Agent, Api
from tests.control_plane.reconcile_fleet import NIGHT, Fleet
from tests.worlds.clocks import ManualClock

WINDOW = timedelta(minutes=15)
SETTLE = timedelta(minutes=1)
OUTLIVED = NIGHT + WINDOW + TOKEN_LIFETIME + OUTLIVED_MARGIN + SETTLE


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, services, clock)
    yield made
    made.close()


def _status(fleet: Fleet, run_id: object) -> dict[str, Any]:
    return fleet.one(
        "SELECT status, outcome_reason, outcome_inferred FROM runs WHERE id = %s", [run_id]
    )


def test_a_claim_left_open_is_ended_as_interrupted_after_its_window_and_token(
    fleet: Fleet,
) -> None:
    run_id = fleet.run(fleet.agent(fleet.org(), "web-01"), "claimed")
    report = fleet.reconcile(OUTLIVED)
    assert report.claims_ended == 1
    assert _status(fleet, run_id) == {
        "status": "failed",
        "outcome_reason": "interrupted",
        "outcome_inferred": True,
    }
    event = fleet.one("SELECT kind, data FROM events WHERE run_id = %s", [run_id])
    assert event["kind"] == "update.failed"
    assert event["data"]["inferred"] is True
    assert fleet.reconcile(OUTLIVED + timedelta(minutes=1)).claims_ended == 0  # once


def test_a_claim_whose_token_may_still_be_good_is_left_open(fleet: Fleet) -> None:
    run_id = fleet.run(fleet.agent(fleet.org(), "web-01"), "claimed")
    assert fleet.reconcile(OUTLIVED - timedelta(minutes=1)).claims_ended == 0
    assert _status(fleet, run_id)["status"] == "claimed"


def test_a_manual_claim_has_no_window_to_outlive(fleet: Fleet) -> None:
    run_id = fleet.run(fleet.agent(fleet.org(), "web-01"), "claimed", trigger="manual")
    assert fleet.reconcile(OUTLIVED + timedelta(days=1)).claims_ended == 0
    assert _status(fleet, run_id)["status"] == "claimed"


def test_the_slot_is_told_once_without_outcome_then_the_ended_claim_is_considered_silently(
    fleet: Fleet,
) -> None:
    org = fleet.org()
    run_id = fleet.run(fleet.agent(org, "lost"), "claimed")
    fleet.reconcile(NIGHT + WINDOW + TOKEN_LIFETIME + SETTLE)  # the review's grace is over
    [notification] = fleet.notifications(org)
    assert [agent["name"] for agent in notification["body"]["no_outcome"]] == ["lost"]
    report = fleet.reconcile(OUTLIVED)
    assert (report.claims_ended, report.review.late_runs_considered) == (1, 1)
    assert len(fleet.notifications(org)) == 1
    considered = fleet.one("SELECT notify_considered_at FROM runs WHERE id = %s", [run_id])
    assert considered["notify_considered_at"] is not None


def _report(api: Api, agent: Agent, run_id: str, **body: Any) -> Any:
    with api.client(agent.agent_key) as client:
        return client.patch(run_path(run_id), json=body)


def test_a_late_report_of_a_switch_inside_the_lease_replaces_the_inference(
    api: Api, agent: Agent, claimed: dict[str, Any], fleet: Fleet
) -> None:
    fleet.reconcile(OUTLIVED)
    response = _report(
        api,
        agent,
        claimed["run_id"],
        status="succeeded",
        version="1.5.0",
        switched_at="2026-11-30T02:10:00Z",
    )
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["outcome_inferred"]) == ("succeeded", False)


def test_a_late_report_of_a_switch_at_0859_after_the_inference_is_unauthorised(
    api: Api, agent: Agent, claimed: dict[str, Any], fleet: Fleet
) -> None:
    fleet.reconcile(OUTLIVED)
    fleet.clock.set(NIGHT + timedelta(hours=6, minutes=59))
    response = _report(api, agent, claimed["run_id"], status="succeeded", version="1.5.0")
    assert response.status_code == 409
    assert response.json()["detail"]["code"] == AnswerCode.OUTCOME_NOT_AUTHORISED.value
    assert _status(fleet, claimed["run_id"])["status"] == "unauthorised"


def test_a_late_failure_replaces_the_inference_with_its_own_reason(
    api: Api, agent: Agent, claimed: dict[str, Any], fleet: Fleet
) -> None:
    fleet.reconcile(OUTLIVED)
    response = _report(api, agent, claimed["run_id"], status="failed", reason="disk_full")
    assert response.status_code == 200
    assert _status(fleet, claimed["run_id"]) == {
        "status": "failed",
        "outcome_reason": "disk_full",
        "outcome_inferred": False,
    }
