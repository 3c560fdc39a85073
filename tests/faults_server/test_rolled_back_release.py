"""A release this host rolled back is "nothing to do" for it: the next slots are
skipped with `release_rolled_back` without taking one of the organisation's tokens, until a newer
release is current for its pair or an operator asks for a retry."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import CLAIMS_PATH, RefusalCode, run_path
from tests.control_plane.conftest import Agent, Api, Org, sign_release
from tests.faults_server.conftest import NIGHT
from tests.worlds.clocks import ManualClock

NEXT_NIGHT = NIGHT + timedelta(days=1)
NEXT_SLOT = "2026-12-01T03:00"
THIRD_SLOT = "2026-12-02T03:00"


def _claim(api: Api, agent: Agent, slot_key: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(CLAIMS_PATH, json={"slot_key": slot_key, "from_version": "1.4.1"})


def _one(pool: Pool, sql: str, params: list[Any]) -> dict[str, Any]:
    with pool.connection() as conn:
        row: dict[str, Any] | None = conn.execute(sql, params).fetchone()
    assert row is not None
    return row


@pytest.fixture
def rolled_back(
    api: Api, agent: Agent, claimed: dict[str, Any], clock: ManualClock
) -> dict[str, Any]:
    """web-01 installed 1.5.0 at 03:04, found it unhealthy and rolled back (reported 03:05)."""
    clock.set(NIGHT + timedelta(minutes=5))
    with api.client(agent.agent_key) as client:
        response = client.patch(
            run_path(claimed["run_id"]),
            json={
                "status": "rolled_back",
                "version": "1.4.1",
                "reason": "health_check_failed",
                "switched_at": "2026-11-30T02:04:00Z",
            },
        )
    assert response.status_code == 200, response.text
    return claimed


def test_the_next_slot_for_the_release_it_rolled_back_is_skipped_without_a_token(
    api: Api, agent: Agent, rolled_back: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    response = _claim(api, agent, NEXT_SLOT)
    assert response.status_code == 409
    assert response.json()["detail"]["code"] == RefusalCode.RELEASE_ROLLED_BACK.value
    assert RefusalCode.RELEASE_ROLLED_BACK.consumes_slot
    run = _one(
        pool,
        "SELECT status, skip_reason, from_version FROM runs WHERE agent_id = %s AND slot_key = %s",
        [agent.agent_id, NEXT_SLOT],
    )
    assert run == {
        "status": "skipped",
        "skip_reason": "release_rolled_back",
        "from_version": "1.4.1",
    }
    tokens = _one(pool, "SELECT count(*) AS n FROM tokens WHERE agent_id = %s", [agent.agent_id])
    assert tokens["n"] == 1  # the first night's only
    granted = _one(
        pool,
        "SELECT coalesce(sum(granted), 0) AS n FROM claim_rounds_org WHERE round_start >= %s",
        [NEXT_NIGHT],
    )
    assert granted["n"] == 0
    event = _one(
        pool,
        "SELECT kind, data FROM events e JOIN runs r ON r.id = e.run_id WHERE r.slot_key = %s",
        [NEXT_SLOT],
    )
    assert event["kind"] == "update.skipped"
    assert event["data"]["release_version"] == "1.5.0"


def test_asking_again_for_the_skipped_slot_is_still_no_token(
    api: Api, agent: Agent, rolled_back: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    # The rollback is answered before the slot (the contract's order): asked again, the same
    # refusal, and still the one skipped run.
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    assert _claim(api, agent, NEXT_SLOT).status_code == 409
    clock.set(NEXT_NIGHT + timedelta(minutes=2))
    again = _claim(api, agent, NEXT_SLOT)
    assert again.status_code == 409
    assert again.json()["detail"]["code"] == RefusalCode.RELEASE_ROLLED_BACK.value
    with pool.connection() as conn:
        runs = conn.execute("SELECT status FROM runs WHERE slot_key = %s", [NEXT_SLOT]).fetchall()
    assert [row["status"] for row in runs] == ["skipped"]


def test_a_newer_release_is_offered_again(
    api: Api,
    agent: Agent,
    rolled_back: dict[str, Any],
    clock: ManualClock,
    services: Services,
    release_key: Ed25519PrivateKey,
) -> None:
    newer = sign_release(release_key, version="1.5.1", manifest_version=43)
    services.releases.publish(
        newer.manifest, newer.signature, newer.artifact, now=clock.now(), stage="everyone"
    )
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    response = _claim(api, agent, NEXT_SLOT)
    assert response.status_code == 201, response.text
    assert response.json()["release"]["version"] == "1.5.1"


def test_a_newer_release_still_in_its_canary_stage_leaves_a_non_canary_on_nothing_to_do(
    api: Api,
    agent: Agent,
    rolled_back: dict[str, Any],
    clock: ManualClock,
    services: Services,
    release_key: Ed25519PrivateKey,
) -> None:
    # 1.5.1 starts as a canary release; this agent is not a canary (no share), so its offer is
    # still the pair's previous release — the very one it rolled back: nothing to do, no token.
    services.rollout.update_settings(
        {"canary_share_percent": 0}, actor=Actor(kind="operator", name="tests"), now=clock.now()
    )
    newer = sign_release(release_key, version="1.5.1", manifest_version=43)
    services.releases.publish(newer.manifest, newer.signature, newer.artifact, now=clock.now())
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    response = _claim(api, agent, NEXT_SLOT)
    assert response.status_code == 409, response.text
    assert response.json()["detail"]["code"] == "release_rolled_back"
    assert "1.5.0" in response.json()["detail"]["message"]


def test_an_operators_retry_offers_the_same_release_again_and_is_on_the_trail(
    api: Api,
    agent: Agent,
    rolled_back: dict[str, Any],
    clock: ManualClock,
    operator_key: str,
    pool: Pool,
) -> None:
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    assert _claim(api, agent, NEXT_SLOT).status_code == 409
    clock.set(NEXT_NIGHT + timedelta(hours=3))
    with api.client(operator_key) as client:
        retry = client.post(f"/v1/admin/agents/{agent.agent_id}/retry-release")
    assert retry.status_code == 200, retry.text
    trail = _one(
        pool,
        "SELECT actor_kind, actor_name FROM events"
        " WHERE kind = 'agent.release_retry_requested' AND agent_id = %s",
        [agent.agent_id],
    )
    assert trail["actor_kind"] == "operator"
    clock.set(NEXT_NIGHT + timedelta(days=1, minutes=1))
    response = _claim(api, agent, THIRD_SLOT)
    assert response.status_code == 201, response.text
    assert response.json()["release"]["version"] == "1.5.0"


def test_a_retry_takes_an_operator_key(
    api: Api, agent: Agent, org: Org, rolled_back: dict[str, Any]
) -> None:
    with api.client(org.panel_key) as client:
        assert client.post(f"/v1/admin/agents/{agent.agent_id}/retry-release").status_code == 403


def test_a_retry_for_an_agent_that_does_not_exist_is_not_found(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        response = client.post(
            "/v1/admin/agents/00000000-0000-0000-0000-000000000000/retry-release"
        )
    assert response.status_code == 404


def test_the_rollback_is_answered_before_a_full_cap(
    api: Api, agent: Agent, rolled_back: dict[str, Any], clock: ManualClock, pool: Pool
) -> None:
    # The contract's order: what stops this agent's release (a halt, its own rollback) comes
    # before the caps, so a full round does not hide it behind `org_cap` at every slot.
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO claim_rounds_org (round_start, org_id, granted) VALUES (%s, %s, 5)",
            [NEXT_NIGHT + timedelta(minutes=1), agent.org_id],
        )
    response = _claim(api, agent, NEXT_SLOT)
    assert response.json()["detail"]["code"] == RefusalCode.RELEASE_ROLLED_BACK.value
    with pool.connection() as conn:
        runs = conn.execute("SELECT status FROM runs WHERE slot_key = %s", [NEXT_SLOT]).fetchall()
    assert [row["status"] for row in runs] == ["skipped"]


def test_another_hosts_rollback_does_not_skip_this_one(
    api: Api,
    rolled_back: dict[str, Any],
    clock: ManualClock,
    org: Org,
    make_agent: Any,
) -> None:
    other = make_agent(org, "web-02")
    clock.set(NEXT_NIGHT + timedelta(minutes=1))
    assert _claim(api, other, NEXT_SLOT).status_code == 201
