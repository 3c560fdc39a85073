"""How a run's build came, reported with its outcome: stored on the run, a fallback counted once
by reason on /metrics, and a hostile value refused by name with nothing recorded."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.types import Pool
from ground.contract import PatchFallbackReason
from tests.control_plane.conftest import Agent, Api, Org, sign_release
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
SWITCHED = "2026-11-30T02:05:00Z"


@pytest.fixture
def agent(make_org: Callable[..., Org], make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(make_org())


@pytest.fixture
def run_id(api: Api, clock: ManualClock, release_key: Ed25519PrivateKey, agent: Agent) -> str:
    release = sign_release(release_key)
    api.services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        response = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    clock.set(datetime(2026, 11, 30, 2, 6, tzinfo=UTC))
    return str(body["run_id"])


def _report(api: Api, agent: Agent, run_id: str, **fields: Any) -> httpx.Response:
    body = {"status": "succeeded", "version": "1.5.0", "switched_at": SWITCHED, **fields}
    with api.client(agent.agent_key) as client:
        return client.patch(f"/v1/agent/runs/{run_id}", json=body)


def _stored(pool: Pool, run_id: str) -> tuple[Any, ...]:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT status, delivery, patch_fallback_reason FROM runs WHERE id = %s", [run_id]
        ).fetchone()
        counts = conn.execute("SELECT sum(n) AS n FROM patch_fallback_counts").fetchone()
    assert row is not None and counts is not None
    return (row["status"], row["delivery"], row["patch_fallback_reason"], counts["n"])


def _fallbacks_on_metrics(api: Api, operator_key: str) -> dict[str, int]:
    with api.client(operator_key) as operator:
        text = operator.get("/metrics").text
    return {
        match.group(1): int(match.group(2))
        for match in re.finditer(r'nachtwacht_patch_fallbacks_total\{reason="(\w+)"\} (\d+)', text)
    }


def test_a_fallback_is_stored_on_the_run_and_counted_once(
    api: Api, pool: Pool, agent: Agent, run_id: str, operator_key: str
) -> None:
    assert _fallbacks_on_metrics(api, operator_key) == {r.value: 0 for r in PatchFallbackReason}
    delivery = {"kind": "full", "fallback_reason": "patch_refused"}
    assert _report(api, agent, run_id, delivery=delivery).status_code == 200
    # The same report again (its answer was lost) is not a second fallback.
    assert _report(api, agent, run_id, delivery=delivery).status_code == 200
    assert _stored(pool, run_id) == ("succeeded", "full", "patch_refused", 1)
    shown = _fallbacks_on_metrics(api, operator_key)
    assert shown["patch_refused"] == 1
    assert sum(shown.values()) == 1


def test_a_patch_is_stored_and_counts_no_fallback(
    api: Api, pool: Pool, agent: Agent, run_id: str
) -> None:
    assert _report(api, agent, run_id, delivery={"kind": "patch"}).status_code == 200
    assert _stored(pool, run_id) == ("succeeded", "patch", None, 0)


def test_an_agent_that_does_not_say_is_served_as_before(
    api: Api, pool: Pool, agent: Agent, run_id: str
) -> None:
    # An agent of the previous release sends no `delivery`: the outcome is recorded all the same.
    assert _report(api, agent, run_id).status_code == 200
    assert _stored(pool, run_id) == ("succeeded", None, None, 0)


@pytest.mark.parametrize(
    ("delivery", "field"),
    [
        pytest.param({"kind": "full", "fallback_reason": "gremlins"}, "delivery.fallback_reason",
                     id="unknown_reason"),
        pytest.param({"kind": "full", "fallback_reason": "x" * 50_000},
                     "delivery.fallback_reason", id="huge_reason"),
        pytest.param({"kind": "full", "fallback_reason": 3}, "delivery.fallback_reason",
                     id="number_for_a_reason"),
        pytest.param({"kind": "delta"}, "delivery.kind", id="unknown_kind"),
        pytest.param({"kind": ["full"]}, "delivery.kind", id="list_for_a_kind"),
        pytest.param({}, "delivery.kind", id="no_kind"),
        pytest.param("full", "delivery", id="text_for_a_delivery"),
        pytest.param({"kind": "full", "bytes": 10}, "delivery.bytes", id="unknown_field"),
        pytest.param({"kind": "patch", "fallback_reason": "base_missing"}, "fallback_reason",
                     id="reason_for_a_patch"),
    ],
)  # fmt: skip
def test_a_hostile_delivery_is_a_422_naming_the_field_and_records_nothing(
    api: Api, pool: Pool, agent: Agent, run_id: str, delivery: object, field: str
) -> None:
    before = _stored(pool, run_id)
    response = _report(api, agent, run_id, delivery=delivery)
    assert response.status_code == 422, response.text
    message = response.json()["detail"]["message"]
    assert f"{field}: " in message, message
    assert len(response.content) < 4000
    assert _stored(pool, run_id) == before == ("claimed", None, None, 0)
