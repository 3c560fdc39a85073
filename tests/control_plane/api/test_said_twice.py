"""A request that says two different things in one header the control plane reads, or in one
query parameter, is refused with a 422 naming the header or parameter: serving it under one of its
values would be a guess (which host answers, which channel the agent follows). The same value twice
says one thing and is served. Real requests over loopback, raw headers, on a real database; a
refused request changes nothing."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import ENROLL_PATH
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
    # Whichever comes first: one the control plane no longer serves, or one it does.
    pytest.param(
        [(b"x-nachtwacht-contract", b"0"), (b"x-nachtwacht-contract", b"7")],
        "",
        "X-Nachtwacht-Contract",
        id="contract_too_old_first",
    ),
    pytest.param(
        [(b"x-nachtwacht-contract", b"7"), (b"x-nachtwacht-contract", b"6")],
        "",
        "X-Nachtwacht-Contract",
        id="contract_two_served",
    ),
    pytest.param(
        [(b"x-nachtwacht-contract", b"seven"), (b"x-nachtwacht-contract", b"7")],
        "",
        "X-Nachtwacht-Contract",
        id="contract_unreadable_first",
    ),
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


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        pytest.param(
            [(b"x-nachtwacht-contract", b"6"), (b"x-nachtwacht-contract", b"3")],
            "",
            id="two_contracts",
        ),
        pytest.param([], "?slot=1&slot=2", id="two_query_values"),
    ],
)
def test_a_claim_that_says_two_things_in_a_full_round_is_the_same_422(
    agent_requests: AgentRequests,
    api: Api,
    pool: Pool,
    clock: ManualClock,
    services: Services,
    make_agent: Callable[..., Agent],
    headers: list[tuple[bytes, bytes]],
    query: str,
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
    response = agent_requests.send("POST", f"/v1/agent/claims{query}", [JSON, *headers], body)
    assert response.status_code == 422, response.text[:2000]
    assert table_rows(pool, WATCHED) == before


# Every table a request with a key may write, enrollment's too: a refused one leaves each as it
# was (no event, no refusal or failed sign-in counted, no token spent, no agent or key made).
KEYED = (*WATCHED, "enrollment_tokens", "enrollment_counts", "sign_in_failures")


def _keys(*secrets: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {secret}".encode()) for secret in secrets]


def _raw(
    api: Api,
    method: str,
    path: str,
    headers: list[tuple[bytes, bytes]],
    content: bytes | None = None,
) -> httpx.Response:
    """A request over real HTTP with exactly `headers` (raw, in order, repeated if repeated)."""
    request = httpx.Request(method, f"{api.base_url}{path}", headers=headers, content=content)
    with httpx.Client(timeout=30) as client:
        return client.send(request)


@pytest.mark.parametrize(
    "authorization",
    [
        pytest.param(["agent", "other"], id="two_agents_keys"),
        pytest.param(["nwa_made_up", "agent"], id="a_made_up_key_first"),
        pytest.param(["agent", "nwa_made_up"], id="a_made_up_key_second"),
        pytest.param(["Basic dXNlcjpwdw==", "agent"], id="another_scheme_first"),
    ],
)
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        pytest.param("GET", "/v1/agent/config", None, id="poll"),
        pytest.param(
            "POST",
            "/v1/agent/claims",
            b'{"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"}',
            id="claim",
        ),
        # A body that cannot be read is described only to a good key: which one is a guess too.
        pytest.param("POST", "/v1/agent/claims", b'{"slot_key": 7}', id="claim_unreadable"),
        pytest.param("PUT", "/v1/agent/hold", b'{"until": "2026-12-02T08:00:00Z"}', id="host_hold"),
    ],
)
def test_an_agent_request_with_two_keys_is_a_422_naming_authorization_and_records_nothing(
    agent_requests: AgentRequests,
    pool: Pool,
    make_agent: Callable[..., Agent],
    authorization: list[str],
    method: str,
    path: str,
    body: bytes | None,
) -> None:
    other = make_agent(agent_requests.org, "web-02")
    named = {"agent": agent_requests.agent.agent_key, "other": other.agent_key}
    values = [named.get(value, value) for value in authorization]
    headers = [
        (b"authorization", (v if v.startswith("Basic ") else f"Bearer {v}").encode())
        for v in values
    ]
    before = table_rows(pool, KEYED)
    # Twice: the second may be answered from memory, which must judge alike.
    for _ in range(2):
        response = agent_requests.send(
            method,
            path,
            [*headers, (b"x-nachtwacht-host-id", b"host-0001"), (b"date", DATE), JSON],
            body,
            with_key=False,
        )
        assert response.status_code == 422, response.text[:2000]
        detail = response.json()["detail"]
        assert detail["code"] == "invalid_request", detail
        assert detail["message"].startswith("Authorization: "), detail
        assert "expected one key" in detail["message"], detail
        # No key is said back, good or made up.
        assert all(value not in response.text for value in values), response.text
        assert "Traceback" not in response.text
        assert table_rows(pool, KEYED) == before


def test_the_same_key_twice_says_one_thing_and_is_served(
    agent_requests: AgentRequests, pool: Pool
) -> None:
    key = agent_requests.agent.agent_key
    response = agent_requests.send("GET", "/v1/agent/config", _keys(key, key), with_key=False)
    assert response.status_code == 200, response.text[:2000]


@pytest.mark.parametrize("order", ["used_up_first", "good_first"])
def test_an_enrollment_with_two_tokens_is_a_422_and_records_nothing(
    api: Api, pool: Pool, services: Services, clock: ManualClock, operator_key: str, order: str
) -> None:
    """A used-up token and a good one: judged by the first, the exchange would count and record
    a refusal, or make an agent with a key; it must do neither."""
    from uuid import UUID

    from control_plane.enrollment.rules import TokenTerms
    from control_plane.events.trail import Actor

    org = services.accounts.create_org("Acme", now=clock.now())
    tokens = [
        services.enrollment.create(
            UUID(str(org.org_id)),
            TokenTerms(),
            now=clock.now(),
            actor=Actor(kind="operator", name="cli:tests"),
        )
        for _ in range(2)
    ]
    used_up, good = (token.secret for token in tokens)
    with api.client(used_up) as host:
        assert host.post(ENROLL_PATH, json={"name": "web-00"}).status_code == 201
    pair = [used_up, good] if order == "used_up_first" else [good, used_up]
    before = table_rows(pool, KEYED)
    response = _raw(api, "POST", ENROLL_PATH, [*_keys(*pair), JSON], b'{"name": "web-01"}')
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith("Authorization: "), response.text
    assert used_up not in response.text and good not in response.text
    assert table_rows(pool, KEYED) == before


@pytest.mark.parametrize(
    ("path", "pair"),
    [
        pytest.param("/v1/admin/events", ("operator", "panel"), id="operator_then_panel"),
        pytest.param("/v1/admin/events", ("operator", "nwo_made_up"), id="operator_made_up"),
        pytest.param("/v1/agents/{agent_id}", ("panel", "operator"), id="panel_then_operator"),
    ],
)
def test_an_operator_or_panel_request_with_two_keys_is_a_422(
    agent_requests: AgentRequests,
    api: Api,
    pool: Pool,
    operator_key: str,
    path: str,
    pair: tuple[str, str],
) -> None:
    named = {"operator": operator_key, "panel": agent_requests.org.panel_key}
    path = path.format(agent_id=agent_requests.agent.agent_id)
    before = table_rows(pool, KEYED)
    response = _raw(api, "GET", path, _keys(*(named.get(key, key) for key in pair)))
    assert response.status_code == 422, (path, response.text[:2000])
    assert response.json()["detail"]["message"].startswith("Authorization: ")
    assert table_rows(pool, KEYED) == before


@pytest.mark.parametrize(
    "types",
    [
        pytest.param([JSON, (b"content-type", b"text/plain")], id="json_then_text"),
        pytest.param([(b"content-type", b"text/plain"), JSON], id="text_then_json"),
    ],
)
def test_a_claim_with_two_content_types_is_a_422_naming_it_and_changes_nothing(
    agent_requests: AgentRequests, pool: Pool, types: list[tuple[bytes, bytes]]
) -> None:
    before = table_rows(pool, KEYED)
    response = agent_requests.send(
        "POST",
        "/v1/agent/claims",
        types,
        b'{"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"}',
    )
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith("Content-Type: "), response.text
    assert table_rows(pool, KEYED) == before


@pytest.mark.parametrize(("headers", "query", "named"), POLLS)
def test_a_poll_that_says_two_things_after_one_that_was_served_is_the_same_422(
    agent_requests: AgentRequests,
    pool: Pool,
    headers: list[tuple[bytes, bytes]],
    query: str,
    named: str | None,
) -> None:
    """The answer kept in memory from a plain poll is never given to one that says two things."""
    path = "/v1/agent/config" + (f"?{query}" if query else "")
    for _ in range(2):
        plain = agent_requests.send("GET", "/v1/agent/config")
        assert plain.status_code == 200, plain.text[:2000]
    before = table_rows(pool, WATCHED)
    response = agent_requests.send("GET", path, headers)
    if named is None:
        assert response.status_code == 200, response.text[:2000]
        return
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith(f"{named}: ")
    assert table_rows(pool, WATCHED) == before


def _agent_operations(services: Services, clock: ManualClock) -> list[tuple[str, str]]:
    """Every operation under `/v1/agent/` the OpenAPI document lists, its path's ids filled in."""
    from control_plane.api.agent_contract import AGENT_PATHS
    from control_plane.api.app import create_app

    found = []
    for path, operations in create_app(services, clock).openapi()["paths"].items():
        if path.startswith(AGENT_PATHS):
            filled = re.sub(r"\{[^}]+\}", "00000000-0000-4000-8000-000000000001", path)
            found.extend((method.upper(), filled) for method in operations)
    return found


# (the keys sent, the contract headers sent, the status and code expected)
CONTRACT_FIRST = [
    pytest.param([], [b"6", b"3"], 422, "invalid_request", id="no_key_two_contracts"),
    pytest.param([], [b"0", b"7"], 422, "invalid_request", id="no_key_too_old_and_served"),
    pytest.param(["nwa_made_up"], [b"7", b"six"], 422, "invalid_request", id="made_up_key"),
    pytest.param(["agent"], [b"7", b"6"], 422, "invalid_request", id="good_key_two_contracts"),
    pytest.param([], [b"0"], 400, "contract_too_old", id="no_key_too_old"),
    pytest.param([], [b"0", b"0"], 400, "contract_too_old", id="no_key_too_old_twice"),
    pytest.param(["agent", "nwa_made_up"], [b"0"], 400, "contract_too_old", id="two_keys_too_old"),
]


@pytest.mark.parametrize(("keys", "contracts", "status", "code"), CONTRACT_FIRST)
def test_every_agent_route_judges_the_contract_header_before_the_key(
    agent_requests: AgentRequests,
    pool: Pool,
    services: Services,
    clock: ManualClock,
    keys: list[str],
    contracts: list[bytes],
    status: int,
    code: str,
) -> None:
    """The contract's check comes before anything, key or none: an agent always learns that it
    is too old, and a request that says two things about its contract is refused as such, never
    answered with the 401 of a request without a key."""
    named = {"agent": agent_requests.agent.agent_key}
    headers = [
        *_keys(*(named.get(key, key) for key in keys)),
        *((b"x-nachtwacht-contract", value) for value in contracts),
        JSON,
    ]
    operations = _agent_operations(services, clock)
    assert ("GET", "/v1/agent/config") in operations and ("POST", ENROLL_PATH) in operations
    before = table_rows(pool, KEYED)
    wrong = []
    for method, path in operations:
        response = agent_requests.send(method, path, headers, b"{}", with_key=False)
        detail = response.json().get("detail") if response.content else None
        if (
            response.status_code != status
            or not isinstance(detail, dict)
            or detail.get("code") != code
            or not detail["message"].startswith("X-Nachtwacht-Contract: " if status == 422 else "")
        ):
            wrong.append((method, path, response.status_code, response.text[:300]))
    assert wrong == []
    assert table_rows(pool, KEYED) == before
