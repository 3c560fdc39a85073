"""`GET /metrics`: Prometheus text for operators only — claims granted
and refused by reason, runs by status and trigger, worker lag, notifications and deliveries."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import CONFIG_PATH
from tests.control_plane.conftest import Agent, Api
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, NIGHT_KEY, Fleet
from tests.control_plane.root_chain import RootChain
from tests.worlds.clocks import ManualClock
from tests.worlds.processes import REPO_ROOT
from tests.worlds.waiting import wait_until

SAMPLE = re.compile(r'^[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? (-?[0-9.e+]+|NaN)$')


def _samples(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        assert SAMPLE.match(line), line
        name, value = line.rsplit(" ", 1)
        samples[re.sub(r',?replica="[^"]*"', "", name).replace("{}", "")] = float(value)
    return samples


def test_metrics_count_claims_runs_lag_and_notifications(
    api: Api, fleet: Fleet, services: Services, operator_key: str, make_org, make_agent
) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    fleet.rounds_full(NIGHT, 15, org_id=org.org_id)
    fleet.clock.set(NIGHT + timedelta(minutes=2))
    with api.client(agent.agent_key) as client:
        for _ in range(3):
            client.post("/v1/agent/claims", json={"slot_key": NIGHT_KEY})
        client.post("/v1/agent/claims", json={"slot_key": "2026-11-30T03:07"})
    services.refusals.flush()
    fleet.reconcile(AFTER_NIGHT)
    fleet.clock.set(AFTER_NIGHT + timedelta(minutes=1))
    with api.client(operator_key) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    samples = _samples(response.text)
    assert samples['nachtwacht_claims_refused_total{reason="org_cap"}'] == 3
    assert samples['nachtwacht_claims_refused_total{reason="not_a_slot"}'] == 1
    assert samples['nachtwacht_claim_refusal_facts{reason="org_cap"}'] == 1
    assert samples["nachtwacht_claims_granted_total"] == 0
    assert samples['nachtwacht_runs{status="missed",trigger="schedule"}'] == 1
    assert samples['nachtwacht_missed_slots{reason="throttled"}'] == 1
    assert samples["nachtwacht_notifications_total"] == 1
    # Reconciled up to AFTER_NIGHT minus the one-minute settle margin; asked a minute later.
    assert samples["nachtwacht_reconcile_lag_seconds"] == 120
    assert samples["nachtwacht_reconcile_last_pass_timestamp_seconds"] == AFTER_NIGHT.timestamp()


def test_every_metric_served_is_in_the_reference_with_its_type(api: Api, operator_key: str) -> None:
    # docs/metrics.md is what an operator writes alerts and dashboards from.
    with api.client(operator_key) as client:
        text = client.get("/metrics").text
    served = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    reference = (REPO_ROOT / "docs" / "metrics.md").read_text()
    documented = dict(
        re.findall(r"^\| `(nachtwacht_[a-z_]+)` \| (counter|gauge) \|", reference, re.M)
    )
    assert {name: served[name] for name in served if documented.get(name) != served[name]} == {}


def test_metrics_before_the_first_pass_say_not_a_number(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        samples = _samples(client.get("/metrics").text)
    assert str(samples["nachtwacht_reconcile_lag_seconds"]) == "nan"


@pytest.mark.parametrize("who", ["nobody", "panel", "agent"])
def test_metrics_are_for_operators_only(api: Api, make_org, make_agent, who: str) -> None:
    org = make_org("Acme")
    keys = {"nobody": None, "panel": org.panel_key, "agent": make_agent(org, "w").agent_key}
    with api.client(keys[who]) as client:
        response = client.get("/metrics")
    assert response.status_code == (401 if who == "nobody" else 403)
    assert "nachtwacht_" not in response.text


def _publish_root(pool: Pool, version: int, *, published: datetime, expires: datetime) -> None:
    # A signed root of that version, stored with the instants the figures read.
    chain = RootChain()
    body = chain.v1
    for _ in range(version - 1):
        body = chain.next(body)
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO trust_roots (version, body, expires_at, published_at, published_by)"
            " VALUES (%s, %s, %s, %s, 'operator:test')",
            [version, body, expires, published],
        )


def _holds_root(pool: Pool, agent: Agent, version: int | None) -> None:
    with pool.connection() as conn:
        conn.execute(
            "UPDATE agents SET trust_root_version = %s WHERE id = %s", [version, agent.agent_id]
        )


def test_metrics_before_any_trust_root_count_every_agent_as_holding_none(
    api: Api, operator_key: str, make_org, make_agent
) -> None:
    org = make_org("Acme")
    make_agent(org, "web-01")
    make_agent(org, "web-02")
    with api.client(operator_key) as client:
        samples = _samples(client.get("/metrics").text)
    assert samples["nachtwacht_trust_root_version"] == 0
    assert str(samples["nachtwacht_trust_root_expires_timestamp_seconds"]) == "nan"
    assert str(samples["nachtwacht_trust_root_published_timestamp_seconds"]) == "nan"
    assert samples['nachtwacht_agents_by_trust_root{state="none"}'] == 2
    assert samples['nachtwacht_agents_by_trust_root{state="current"}'] == 0
    assert samples['nachtwacht_agents_by_trust_root{state="older"}'] == 0


def test_metrics_show_the_newest_trust_root_and_the_agents_behind_it(
    api: Api, pool: Pool, services: Services, operator_key: str, make_org, make_agent
) -> None:
    first = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    _publish_root(pool, 1, published=first, expires=first + timedelta(days=365))
    _publish_root(
        pool, 2, published=first + timedelta(days=20), expires=first + timedelta(days=400)
    )
    org = make_org("Acme")
    on_newest, on_older, on_none, ahead, deleted = (
        make_agent(org, name) for name in ("new", "old", "none", "ahead", "gone")
    )
    _holds_root(pool, on_newest, 2)
    _holds_root(pool, on_older, 1)
    _holds_root(pool, on_none, None)
    # Enrolled with a root operators have not published here yet: not behind.
    _holds_root(pool, ahead, 3)
    # A deleted agent still on the old root is not part of the fleet any more.
    _holds_root(pool, deleted, 1)
    with pool.connection() as conn:
        conn.execute("UPDATE agents SET deleted_at = now() WHERE id = %s", [deleted.agent_id])
    with api.client(operator_key) as client:
        samples = _samples(client.get("/metrics").text)
    assert samples["nachtwacht_trust_root_version"] == 2
    assert samples["nachtwacht_trust_root_expires_timestamp_seconds"] == (
        (first + timedelta(days=400)).timestamp()
    )
    assert samples["nachtwacht_trust_root_published_timestamp_seconds"] == (
        (first + timedelta(days=20)).timestamp()
    )
    assert samples['nachtwacht_agents_by_trust_root{state="current"}'] == 2
    assert samples['nachtwacht_agents_by_trust_root{state="older"}'] == 1
    assert samples['nachtwacht_agents_by_trust_root{state="none"}'] == 1
    assert services.metrics.trust_root_standing().agents_older == 1


def test_agents_online_are_the_ones_seen_within_the_last_three_minutes(
    api: Api, services: Services, clock: ManualClock, operator_key: str, make_org, make_agent
) -> None:
    """The figure the alert on a fleet that stopped reaching us reads: polls count, a deleted
    agent and a quiet one do not."""
    org = make_org("Acme")
    agents = [make_agent(org, f"web-{n:02d}") for n in range(3)]
    clock.set(datetime(2026, 11, 30, 12, 0, tzinfo=UTC))
    for agent in agents:
        with api.client(agent.agent_key) as client:
            assert client.get(CONFIG_PATH).status_code == 200

    def online() -> float:
        with api.client(operator_key) as client:
            return _samples(client.get("/metrics").text)["nachtwacht_agents_online"]

    assert wait_until(lambda: online() == 3, what="three agents online")
    services.accounts.delete_agent(
        UUID(agents[0].agent_id), now=clock.now(), actor=Actor(kind="operator")
    )
    clock.advance(minutes=2)
    assert online() == 2
    clock.advance(minutes=2)  # no poll for four minutes
    assert online() == 0
