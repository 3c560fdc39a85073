"""Revocation is honoured up to the swap: the permit asked immediately before
the switch, and the outcome the control plane refuses to record as a success when it did not
authorise the switch — its token revoked or expired, or the window closed, before the switch."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import pytest

from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import AnswerCode, RefusalCode, SwapPermit, confirm_path, run_path
from tests.control_plane.conftest import Agent, Api, Org
from tests.faults_server.conftest import NIGHT, SLOT, claim
from tests.worlds.clocks import ManualClock

GRANTED = NIGHT + timedelta(minutes=1)
WINDOW_CLOSES = NIGHT + timedelta(minutes=15)


def _confirm(api: Api, agent: Agent, run_id: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(confirm_path(run_id))


def _report(api: Api, agent: Agent, run_id: str, **body: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.patch(run_path(run_id), json=body)


def _brake(services: Services, clock: ManualClock) -> None:
    services.brake.set(
        engaged=True,
        reason="incident 13",
        revoke_outstanding=True,
        actor=Actor(kind="operator", name="tests"),
        now=clock.now(),
    )


def _run(pool: Pool, run_id: str) -> dict[str, Any]:
    with pool.connection() as conn:
        row: dict[str, Any] | None = conn.execute(
            "SELECT status, outcome_reason, switched_at, version, error FROM runs WHERE id = %s",
            [run_id],
        ).fetchone()
    assert row is not None
    return row


def _events(pool: Pool, run_id: str) -> list[dict[str, Any]]:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT kind, data FROM events WHERE run_id = %s ORDER BY id", [run_id]
        ).fetchall()


# -- the permit ------------------------------------------------------------------------------------


def test_a_good_token_inside_the_window_is_a_permit(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock
) -> None:
    clock.set(NIGHT + timedelta(minutes=9))
    response = _confirm(api, agent, claimed["run_id"])
    assert response.status_code == 200, response.text
    permit = SwapPermit.model_validate(response.json())
    assert permit.run_id == UUID(claimed["run_id"])
    assert str(permit.token.id) == claimed["token"]["id"]
    assert permit.window_closes_at == WINDOW_CLOSES


def test_the_brake_revoking_mid_download_refuses_the_permit(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, services: Services
) -> None:
    clock.set(NIGHT + timedelta(minutes=4))
    _brake(services, clock)
    clock.set(NIGHT + timedelta(minutes=6))  # the download finished meanwhile
    response = _confirm(api, agent, claimed["run_id"])
    assert response.status_code == 403
    assert response.json()["detail"]["code"] == AnswerCode.TOKEN_REVOKED.value
    assert "brake" in response.json()["detail"]["message"]


def test_a_permit_asked_after_the_window_closed_is_refused(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock
) -> None:
    clock.set(WINDOW_CLOSES)
    response = _confirm(api, agent, claimed["run_id"])
    assert response.status_code == 409
    assert response.json()["detail"]["code"] == RefusalCode.WINDOW_CLOSED.value


def test_a_permit_asked_with_an_expired_token_is_refused(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    with pool.connection() as conn:
        conn.execute(
            "UPDATE tokens SET expires_at = %s WHERE run_id = %s",
            [NIGHT + timedelta(minutes=5), claimed["run_id"]],
        )
    clock.set(NIGHT + timedelta(minutes=5))
    response = _confirm(api, agent, claimed["run_id"])
    assert response.status_code == 403
    assert response.json()["detail"]["code"] == AnswerCode.TOKEN_EXPIRED.value


def test_a_permit_for_a_finished_run_is_refused(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock
) -> None:
    clock.set(NIGHT + timedelta(minutes=3))
    assert _report(api, agent, claimed["run_id"], status="failed").status_code == 200
    response = _confirm(api, agent, claimed["run_id"])
    assert response.status_code == 409
    assert response.json()["detail"]["code"] == RefusalCode.RUN_FINISHED.value


def test_a_permit_for_another_agents_run_is_not_found(
    api: Api, claimed: dict[str, Any], org: Org, make_agent: Any
) -> None:
    other = make_agent(org, "web-02")
    response = _confirm(api, other, claimed["run_id"])
    assert response.status_code == 404
    assert response.json()["detail"]["code"] == AnswerCode.RUN_NOT_FOUND.value


def test_the_permit_takes_an_agent_key(api: Api, org: Org, claimed: dict[str, Any]) -> None:
    assert (
        _confirm(api, Agent("x", org.org_id, org.panel_key), claimed["run_id"]).status_code == 403
    )


# -- the outcome it did not authorise --------------------------------------------------------------


def test_a_success_switched_after_the_brake_revoked_its_token_is_recorded_as_unauthorised(
    api: Api,
    agent: Agent,
    claimed: dict[str, Any],
    clock: ManualClock,
    services: Services,
    pool: Pool,
) -> None:
    clock.set(NIGHT + timedelta(minutes=4))
    _brake(services, clock)
    clock.set(NIGHT + timedelta(minutes=7))
    response = _report(
        api,
        agent,
        claimed["run_id"],
        status="succeeded",
        version="1.5.0",
        switched_at="2026-11-30T02:06:00Z",
    )
    assert response.status_code == 409
    assert response.json()["detail"]["code"] == AnswerCode.OUTCOME_NOT_AUTHORISED.value
    run = _run(pool, claimed["run_id"])
    assert run["status"] == "unauthorised"
    assert run["switched_at"] == NIGHT + timedelta(minutes=6)
    kinds = [event["kind"] for event in _events(pool, claimed["run_id"])]
    assert kinds[-1] == "update.unauthorised"
    assert "update.succeeded" not in kinds
    assert _events(pool, claimed["run_id"])[-1]["data"]["reported_status"] == "succeeded"


def test_the_same_unauthorised_report_again_is_refused_again_and_recorded_once(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    clock.set(WINDOW_CLOSES + timedelta(hours=6))  # the daemon restarted at 08:59 and switched
    for _ in range(2):
        response = _report(api, agent, claimed["run_id"], status="succeeded", version="1.5.0")
        assert response.status_code == 409
        assert response.json()["detail"]["code"] == AnswerCode.OUTCOME_NOT_AUTHORISED.value
    kinds = [event["kind"] for event in _events(pool, claimed["run_id"])]
    assert kinds.count("update.unauthorised") == 1
    assert _run(pool, claimed["run_id"])["status"] == "unauthorised"


def test_a_switch_after_the_window_without_switched_at_is_judged_at_receipt(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    clock.set(WINDOW_CLOSES + timedelta(seconds=1))
    response = _report(
        api, agent, claimed["run_id"], status="rolled_back", reason="health_check_failed"
    )
    assert response.status_code == 409
    run = _run(pool, claimed["run_id"])
    assert (run["status"], run["outcome_reason"]) == ("unauthorised", "health_check_failed")


def test_a_switch_inside_the_lease_reported_late_is_a_success(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    # Switched at 03:10 local, reported from the outbox after the window closed: authorised.
    clock.set(WINDOW_CLOSES + timedelta(minutes=20))
    response = _report(
        api,
        agent,
        claimed["run_id"],
        status="succeeded",
        version="1.5.0",
        switched_at="2026-11-30T02:10:00Z",
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "succeeded"
    assert response.json()["switched_at"] == "2026-11-30T02:10:00Z"


def test_a_switched_at_in_the_future_counts_as_the_receipt_time(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    clock.set(WINDOW_CLOSES + timedelta(minutes=1))
    response = _report(
        api,
        agent,
        claimed["run_id"],
        status="succeeded",
        version="1.5.0",
        switched_at="2026-11-30T09:00:00Z",
    )
    assert response.status_code == 409
    assert _run(pool, claimed["run_id"])["switched_at"] == WINDOW_CLOSES + timedelta(minutes=1)


def test_a_failure_after_the_brake_is_recorded_with_its_reason(
    api: Api,
    agent: Agent,
    claimed: dict[str, Any],
    clock: ManualClock,
    services: Services,
    pool: Pool,
) -> None:
    clock.set(NIGHT + timedelta(minutes=4))
    _brake(services, clock)
    response = _report(
        api, agent, claimed["run_id"], status="failed", reason="token_revoked", error="braked"
    )
    assert response.status_code == 200
    assert response.json()["reason"] == "token_revoked"
    run = _run(pool, claimed["run_id"])
    assert (run["status"], run["outcome_reason"]) == ("failed", "token_revoked")


def test_an_unknown_reason_is_refused_naming_the_field(
    api: Api, agent: Agent, claimed: dict[str, Any]
) -> None:
    response = _report(api, agent, claimed["run_id"], status="failed", reason="cosmic_rays")
    assert response.status_code == 422
    assert "reason" in response.json()["detail"]["message"]


@pytest.mark.parametrize("reason", ["cosmic_rays", "", "TOKEN_REVOKED"])
def test_the_database_refuses_a_reason_outside_the_contract(
    claimed: dict[str, Any], pool: Pool, reason: str
) -> None:
    import psycopg

    with pytest.raises(psycopg.errors.CheckViolation), pool.connection() as conn:
        conn.execute(
            "UPDATE runs SET outcome_reason = %s WHERE id = %s", [reason, claimed["run_id"]]
        )


def test_a_renewed_lease_after_the_brake_authorises_the_switch(
    api: Api,
    agent: Agent,
    claimed: dict[str, Any],
    clock: ManualClock,
    services: Services,
    pool: Pool,
) -> None:
    clock.set(NIGHT + timedelta(minutes=2))
    _brake(services, clock)
    services.brake.set(
        engaged=False,
        reason=None,
        revoke_outstanding=False,
        actor=Actor(kind="operator", name="tests"),
        now=clock.now(),
    )
    clock.set(NIGHT + timedelta(minutes=3))
    renewed = claim(api, agent, SLOT)
    assert renewed["token"]["id"] != claimed["token"]["id"]
    clock.set(NIGHT + timedelta(minutes=8))
    assert _confirm(api, agent, claimed["run_id"]).status_code == 200
    response = _report(
        api,
        agent,
        claimed["run_id"],
        status="succeeded",
        version="1.5.0",
        switched_at="2026-11-30T02:08:00Z",
    )
    assert response.status_code == 200


def test_a_manual_update_has_a_permit_without_a_window(
    api: Api,
    agent: Agent,
    org: Org,
    clock: ManualClock,
    services: Services,
    published: object,
) -> None:
    clock.set(NIGHT + timedelta(hours=10))  # midday: no window for a person's click
    requested = services.runs.request_manual_update(
        UUID(org.org_id), UUID(agent.agent_id), _panel_credential(services, org), now=clock.now()
    )
    with api.client(agent.agent_key) as client:
        granted = client.post("/v1/agent/claims", json={"manual_run_id": str(requested.run.run_id)})
    assert granted.status_code == 201, granted.text
    response = _confirm(api, agent, granted.json()["run_id"])
    assert response.status_code == 200, response.text
    assert response.json()["window_closes_at"] is None


def _panel_credential(services: Services, org: Org) -> UUID:
    from control_plane.accounts.credentials import Audience

    principal = services.accounts.authenticate(org.panel_key, Audience.PANEL)
    return principal.credential_id
