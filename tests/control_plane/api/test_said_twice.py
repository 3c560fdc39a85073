"""A request that says two different things in one header the control plane reads, or in one
query parameter, is refused with a 422 naming the header or parameter: serving it under one of its
values would be a guess (which host answers, which channel the agent follows). The same value twice
says one thing and is served. Real requests over loopback, raw headers, on a real database; a
refused request changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.api.conftest import JSON, AgentRequests
from tests.control_plane.conftest import Agent, Api, table_rows
from tests.worlds.clocks import ManualClock

WATCHED = (
    "runs",
    "tokens",
    "events",
    "claim_refusals",
    "agents",
    "agent_hosts",
    "agent_clocks",
    "credentials",
)

DATE = b"Mon, 30 Nov 2026 02:01:00 GMT"


# (extra raw headers, query string, the name a 422 must start with; None: served)
POLLS = [
    pytest.param(
        [(b"x-nachtwacht-host-id", b"host-0001"), (b"x-nachtwacht-host-id", b"host-0002")],
        "",
        "X-Nachtwacht-Host-Id",
        id="host_id_two_values",
    ),
    pytest.param(
        [(b"x-nachtwacht-host-id", b"host-0001"), (b"X-Nachtwacht-Host-Id", b"host-0001")],
        "",
        None,
        id="host_id_same_twice",
    ),
    pytest.param(
        [(b"x-nachtwacht-trust-root", b"1"), (b"x-nachtwacht-trust-root", b"2")],
        "",
        "X-Nachtwacht-Trust-Root",
        id="trust_root_two_values",
    ),
    pytest.param(
        [(b"date", DATE), (b"date", b"Mon, 30 Nov 2026 09:01:00 GMT")],
        "",
        "Date",
        id="date_two_values",
    ),
    pytest.param([(b"date", DATE), (b"date", DATE)], "", None, id="date_same_twice"),
    pytest.param([], "channel=stable&channel=edge", "channel", id="channel_two_values"),
    pytest.param([], "channel=stable&channel=stable", None, id="channel_same_twice"),
    pytest.param(
        [], "platform=linux-x86_64&platform=linux-arm64", "platform", id="platform_two_values"
    ),
    pytest.param([], "channel=stable&extra=1&extra=2", "extra", id="unread_two_values"),
]


@pytest.mark.parametrize(("headers", "query", "named"), POLLS)
def test_a_poll_that_says_two_things_is_a_422_naming_it(
    agent_requests: AgentRequests,
    pool: Pool,
    headers: list[tuple[bytes, bytes]],
    query: str,
    named: str | None,
) -> None:
    before = table_rows(pool, WATCHED)
    path = "/v1/agent/config" + (f"?{query}" if query else "")
    # Twice: the second poll may be answered from memory, which must judge alike.
    for _ in range(2):
        response = agent_requests.send("GET", path, headers)
        if named is None:
            assert response.status_code == 200, response.text[:2000]
            continue
        assert response.status_code == 422, response.text[:2000]
        message = response.json()["detail"]["message"]
        assert message.startswith(f"{named}: "), message
        assert "expected one value" in message, message
        assert "Traceback" not in response.text
        assert table_rows(pool, WATCHED) == before


@pytest.mark.parametrize(
    ("headers", "query", "named"),
    [
        pytest.param(
            [(b"x-nachtwacht-host-id", b"host-0001"), (b"x-nachtwacht-host-id", b"host-0002")],
            "",
            "X-Nachtwacht-Host-Id",
            id="two_hosts",
        ),
        pytest.param(
            [(b"x-nachtwacht-contract", b"6"), (b"x-nachtwacht-contract", b"3")],
            "",
            "X-Nachtwacht-Contract",
            id="two_contracts",
        ),
        pytest.param([], "?slot=1&slot=2", "slot", id="two_query_values"),
    ],
)
def test_a_claim_that_says_two_things_is_a_422_and_changes_nothing(
    agent_requests: AgentRequests,
    pool: Pool,
    clock: ManualClock,
    headers: list[tuple[bytes, bytes]],
    query: str,
    named: str,
) -> None:
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    before = table_rows(pool, WATCHED)
    response = agent_requests.send(
        "POST",
        f"/v1/agent/claims{query}",
        [JSON, *headers],
        b'{"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"}',
    )
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith(f"{named}: ")
    assert table_rows(pool, WATCHED) == before


def test_an_operator_listing_with_two_limits_is_a_422(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        response = client.get("/v1/admin/events?limit=5&limit=7")
        same = client.get("/v1/admin/events?limit=5&limit=5")
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith("limit: "), response.text
    assert same.status_code == 200, same.text[:2000]


def test_a_claim_that_says_two_things_in_a_full_round_is_the_same_422(
    agent_requests: AgentRequests,
    api: Api,
    pool: Pool,
    clock: ManualClock,
    services: Services,
    make_agent: Callable[..., Agent],
) -> None:
    """Where the answers kept in memory would refuse the claim (the round is full), the routes
    still judge a request that says two things: the same 422, whichever replica answers."""
    first = make_agent(agent_requests.org, "web-02")
    services.settings.update({"org_cap": 1})
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    body = b'{"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"}'
    with api.client(first.agent_key) as client:
        granted = client.post(
            "/v1/agent/claims", content=body, headers={"Content-Type": "application/json"}
        )
    assert granted.status_code == 201, granted.text[:2000]
    before = table_rows(pool, WATCHED)
    for headers, query in (
        ([(b"x-nachtwacht-contract", b"6"), (b"x-nachtwacht-contract", b"3")], ""),
        ([], "?slot=1&slot=2"),
    ):
        response = agent_requests.send("POST", f"/v1/agent/claims{query}", [JSON, *headers], body)
        assert response.status_code == 422, response.text[:2000]
    assert table_rows(pool, WATCHED) == before
