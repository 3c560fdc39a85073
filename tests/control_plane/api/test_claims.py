"""`POST /v1/agent/claims`: the throttle token, checked on the server's clock, within the caps.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
"""

from __future__ import annotations

import base64
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest

from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.fixture
def at_0301(clock: ManualClock) -> ManualClock:
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    return clock


def _claim(api: Api, agent: Agent, slot_key: Any = SLOT, **extra: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(
            "/v1/agent/claims", json={"slot_key": slot_key, "from_version": "1.4.1", **extra}
        )


def _set_caps(api: Api, operator_key: str, **caps: int) -> None:
    with api.client(operator_key) as client:
        assert client.put("/v1/admin/settings", json=caps).status_code == 200


def test_claim_grants_a_token_with_the_exact_release_bytes(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    response = _claim(api, agent)
    assert response.status_code == 201
    body = response.json()
    assert body["slot_key"] == SLOT
    assert body["token"]["expires_at"] == "2026-11-30T03:01:15Z"
    release = body["release"]
    assert release["version"] == "1.5.0"
    assert release["manifest_version"] == 42
    assert base64.b64decode(release["manifest_b64"]) == published.manifest
    assert base64.b64decode(release["signature_b64"]) == published.signature
    assert release["artifact_url"] == f"/v1/agent/runs/{body['run_id']}/artifact"


def test_the_same_claim_again_gets_the_same_run_and_token(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    first = _claim(api, agent)
    at_0301.advance(minutes=3)
    again = _claim(api, agent)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()


@pytest.mark.parametrize(
    ("slot_key", "words"),
    [
        pytest.param("2026-11-30T04:00", "is not one of this agent's slots", id="not_scheduled"),
        pytest.param("tomorrow", "is not a slot key", id="garbage"),
        pytest.param("2026-02-30T03:00", "is not a real date", id="impossible_date"),
        pytest.param("2026-12-01T03:00", "has not started yet", id="future_slot"),
        pytest.param(3, "valid string", id="not_a_string"),
    ],
)
def test_a_key_that_is_not_a_due_slot_gets_422(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    slot_key: Any,
    words: str,
) -> None:
    agent = make_agent(make_org())
    response = _claim(api, agent, slot_key)
    assert response.status_code == 422
    assert words in response.json()["detail"]["message"]


def test_a_schedule_switched_off_has_no_slots(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as panel:
        panel.put(f"/v1/agents/{agent.agent_id}/schedule", json={"enabled": False, "times": []})
    response = _claim(api, agent)
    assert response.status_code == 422
    assert response.json()["detail"]["code"] == "not_a_slot"


@pytest.mark.parametrize(
    ("now", "status", "code"),
    [
        pytest.param(datetime(2026, 11, 30, 2, 0, tzinfo=UTC), 201, None, id="at_the_slot"),
        pytest.param(
            datetime(2026, 11, 30, 2, 13, 59, 999999, tzinfo=UTC),
            201,
            None,
            id="before_the_grant_margin",
        ),
        pytest.param(
            datetime(2026, 11, 30, 2, 14, tzinfo=UTC), 409, "window_closed", id="grant_margin"
        ),
        pytest.param(
            datetime(2026, 11, 30, 2, 14, 59, tzinfo=UTC), 409, "window_closed", id="last_second"
        ),
        pytest.param(datetime(2026, 11, 30, 2, 15, tzinfo=UTC), 409, "window_closed", id="closed"),
        pytest.param(datetime(2026, 11, 30, 8, 0, tzinfo=UTC), 409, "window_closed", id="at_0900"),
        pytest.param(datetime(2026, 11, 30, 1, 59, 59, tzinfo=UTC), 422, "not_a_slot", id="early"),
    ],
)
def test_window_is_checked_on_the_servers_clock(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    now: datetime,
    status: int,
    code: str | None,
) -> None:
    clock.set(now)
    response = _claim(api, make_agent(make_org()))
    assert response.status_code == status
    if code is not None:
        assert response.json()["detail"]["code"] == code


def test_no_token_in_the_window_s_last_minute(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    # Granted at 03:14:30 the download would still run at 03:15, when the switch is refused:
    # a run that fails for nothing. Refused as a closed window, the slot is consumed at once.
    clock.set(datetime(2026, 11, 30, 2, 14, 30, tzinfo=UTC))
    agent = make_agent(make_org())
    refused = _claim(api, agent)
    assert refused.status_code == 409
    detail = refused.json()["detail"]
    assert detail["code"] == "window_closed"
    assert detail["message"] == (
        "slot_key: the window of slot '2026-11-30T03:00' closes at 2026-11-30T02:15:00Z;"
        " no token is granted in its last 60 s"
    )
    assert _claim(api, agent).json()["detail"]["code"] == "window_closed"


def test_a_grant_margin_of_zero_grants_until_the_close(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    _set_caps(api, operator_key, grant_margin_seconds=0)
    clock.set(datetime(2026, 11, 30, 2, 14, 59, tzinfo=UTC))
    assert _claim(api, make_agent(make_org())).status_code == 201


def test_a_wider_grant_margin_refuses_earlier(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    _set_caps(api, operator_key, grant_margin_seconds=300)
    clock.set(datetime(2026, 11, 30, 2, 10, tzinfo=UTC))
    refused = _claim(api, make_agent(make_org()))
    assert refused.status_code == 409
    assert "no token is granted in its last 300 s" in refused.json()["detail"]["message"]


def test_a_grant_asked_again_in_the_margin_is_given_back(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    # Its answer was lost: the token stands, and the agent must learn of it to use or end it.
    clock.set(datetime(2026, 11, 30, 2, 13, 30, tzinfo=UTC))
    agent = make_agent(make_org())
    first = _claim(api, agent)
    clock.set(datetime(2026, 11, 30, 2, 14, 30, tzinfo=UTC))
    again = _claim(api, agent)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()


def test_a_manual_update_has_no_window_and_no_margin(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    # Asked in the last minute of the agent's 03:00 window: a person is watching, not a slot.
    clock.set(datetime(2026, 11, 30, 2, 14, 30, tzinfo=UTC))
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as panel:
        requested = panel.post(f"/v1/agents/{agent.agent_id}/update")
    assert requested.status_code in (200, 202), requested.text
    with api.client(agent.agent_key) as client:
        granted = client.post(
            "/v1/agent/claims", json={"manual_run_id": requested.json()["run_id"]}
        )
    assert granted.status_code == 201, granted.text
    assert _claim(api, agent).json()["detail"]["code"] == "window_closed"


def test_up_to_date_is_still_recorded_in_the_margin(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    # Nothing to download: the margin is about tokens, not about the slot being open.
    clock.set(datetime(2026, 11, 30, 2, 14, 30, tzinfo=UTC))
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        recorded = client.post(
            "/v1/agent/runs", json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}
        )
    assert recorded.status_code == 201


def test_nothing_to_do_consumes_the_slot(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        recorded = client.post(
            "/v1/agent/runs", json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}
        )
        again = client.post(
            "/v1/agent/runs", json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}
        )
    assert (recorded.status_code, again.status_code) == (201, 200)
    assert again.json()["run_id"] == recorded.json()["run_id"]
    refused = _claim(api, agent)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "slot_consumed"


def test_a_slot_before_a_consumed_one_is_consumed_too(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as panel:
        panel.put(
            f"/v1/agents/{agent.agent_id}/schedule",
            json={"enabled": True, "times": ["03:00", "03:05"]},
        )
    clock.set(datetime(2026, 11, 30, 2, 6, tzinfo=UTC))
    assert _claim(api, agent, "2026-11-30T03:05").status_code == 201
    earlier = _claim(api, agent, "2026-11-30T03:00")
    assert earlier.status_code == 409
    assert earlier.json()["detail"]["code"] == "slot_consumed"


def test_brake_refuses_with_503_and_consumes_nothing(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
) -> None:
    agent = make_agent(make_org())
    with api.client(operator_key) as operator:
        operator.put("/v1/admin/brake", json={"engaged": True, "reason": "bad build"})
        braked = _claim(api, agent)
        operator.put("/v1/admin/brake", json={"engaged": False})
    assert braked.status_code == 503
    assert braked.json()["detail"]["code"] == "brake"
    assert "bad build" in braked.json()["detail"]["message"]
    assert _claim(api, agent).status_code == 201


def test_full_org_cap_gets_429_with_seconds_to_the_next_round(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
) -> None:
    _set_caps(api, operator_key, org_cap=2)
    org = make_org()
    agents = [make_agent(org, f"web-{n}") for n in range(3)]
    assert [_claim(api, agent).status_code for agent in agents[:2]] == [201, 201]
    refused = _claim(api, agents[2])
    assert refused.status_code == 429
    assert refused.json()["detail"]["code"] == "org_cap"
    assert refused.json()["detail"]["reason"] == "org_cap"
    assert refused.json()["detail"]["retry_after_seconds"] == 45
    # Another organisation still has its own room.
    assert _claim(api, make_agent(make_org("Other"), "db-01")).status_code == 201
    # The refusal consumed nothing: the next round grants the same slot.
    at_0301.advance(minutes=1)
    assert _claim(api, agents[2]).status_code == 201


def test_full_global_cap_gets_429_global_cap(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
) -> None:
    _set_caps(api, operator_key, org_cap=2, global_cap=2)  # an org cap is at most the global
    first, second, third = (make_agent(make_org(f"Org {n}"), "web-01") for n in range(3))
    assert _claim(api, first).status_code == 201
    assert _claim(api, second).status_code == 201
    refused = _claim(api, third)
    assert refused.status_code == 429
    assert refused.json()["detail"]["code"] == "global_cap"


@pytest.fixture
def full_round(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
) -> Agent:
    """A round whose global cap (1) is taken; returns an agent still waiting."""
    _set_caps(api, operator_key, org_cap=1, global_cap=1)  # an org cap is at most the global
    assert _claim(api, make_agent(make_org("First"), "web-01")).status_code == 201
    return make_agent(make_org("Waiting"), "web-01")


@pytest.fixture
def locked_counters(database_url: str, full_round: Agent) -> Iterator[None]:
    with psycopg.connect(database_url) as holder:
        holder.execute("SELECT * FROM claim_rounds_global FOR UPDATE")
        holder.execute("SELECT * FROM claim_rounds_org FOR UPDATE")
        yield
        holder.rollback()


def test_refusal_takes_no_row_lock(api: Api, full_round: Agent, locked_counters: None) -> None:
    # Another transaction holds every counter row. A refusal that tried to lock or update one
    # would wait behind it and this request would time out instead of answering.
    refused = _claim(api, full_round)
    assert refused.status_code == 429


def test_refusal_writes_nothing(
    api: Api, full_round: Agent, database_url: str, own_transaction_ids: bool
) -> None:
    def snapshot() -> Any:
        with psycopg.connect(database_url, autocommit=True) as conn:
            return conn.execute(
                "SELECT pg_snapshot_xmax(pg_current_snapshot()),"
                " (SELECT json_agg(g) FROM (SELECT xmin::text, * FROM claim_rounds_global) g),"
                " (SELECT json_agg(o) FROM (SELECT xmin::text, * FROM claim_rounds_org) o),"
                " (SELECT count(*) FROM runs), (SELECT count(*) FROM tokens),"
                " (SELECT count(*) FROM events)"
            ).fetchone()

    before = snapshot()
    assert _claim(api, full_round).status_code == 429
    after = snapshot()
    # No transaction id was assigned by anyone: nothing was written, not even a rolled-back row
    # (transaction ids are the server's: only where no one else uses it, see the fixture).
    if own_transaction_ids:
        assert after[0] == before[0]
    assert after[1:] == before[1:]


def test_concurrent_claims_never_exceed_the_caps(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    operator_key: str,
    database_url: str,
) -> None:
    _set_caps(api, operator_key, org_cap=3, global_cap=10)
    agents = [make_agent(make_org(f"Org {o}"), f"web-{n}") for o in range(6) for n in range(5)]
    by_org = {agent.agent_id: agent.org_id for agent in agents}
    start = threading.Barrier(len(agents))
    answers: dict[str, int] = {}

    def claim(agent: Agent) -> None:
        start.wait()
        answers[agent.agent_id] = _claim(api, agent).status_code

    threads = [threading.Thread(target=claim, args=(agent,)) for agent in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    granted = [agent_id for agent_id, status in answers.items() if status == 201]
    assert len(granted) == 10
    assert max(Counter(by_org[agent_id] for agent_id in granted).values()) <= 3
    assert set(answers.values()) == {201, 429}
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT sum(granted) FROM claim_rounds_global").fetchone() == (10,)
        assert conn.execute("SELECT count(*) FROM tokens").fetchone() == (10,)


def test_no_release_means_nothing_to_claim(
    api: Api, at_0301: ManualClock, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    refused = _claim(api, make_agent(make_org()))
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "no_release"


def test_slot_key_or_manual_run_id_exactly_one(
    api: Api,
    at_0301: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        neither = client.post("/v1/agent/claims", json={"from_version": "1.4.1"})
    assert neither.status_code == 422
    assert "exactly one" in neither.json()["detail"]["message"]
