"""`NaN`, `Infinity` and a number beyond a float's range are not JSON (RFC 8259 has no token for
them), though Python's parser reads them: every route refuses them as invalid JSON with a 422
naming the field, never echoing the value it could not write back (that was a 500), and nothing
is stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from control_plane.api.limits import refused_json
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

NON_FINITE = [
    pytest.param("NaN", id="nan"),
    pytest.param("Infinity", id="infinity"),
    pytest.param("-Infinity", id="minus_infinity"),
    pytest.param("1e400", id="overflows_by_exponent"),
    pytest.param("-1E+0400", id="overflows_by_signed_exponent"),
    pytest.param("1" + "0" * 300 + "e9", id="overflows_by_digits_and_small_exponent"),
    pytest.param("1" + "0" * 400 + ".5", id="overflows_by_digits_alone"),
]


def _sent(client: httpx.Client, method: str, path: str, body: str) -> httpx.Response:
    return client.request(
        method, path, content=body.encode(), headers={"Content-Type": "application/json"}
    )


def _assert_refused_as_invalid_json(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail["code"] == "invalid_request"
    assert detail["message"].startswith(f"{field}: ")
    assert "not valid JSON" in detail["message"]
    assert [error["field"] for error in detail["errors"]] == [field]


@pytest.mark.parametrize("token", NON_FINITE)
def test_a_webhook_url_that_is_not_a_finite_number_is_invalid_json(
    api: Api, make_org: Callable[..., Org], token: str
) -> None:
    org = make_org()
    with api.client(org.panel_key) as client:
        assert client.put("/v1/webhook", json={"url": "https://hooks.example/a"}).status_code == 200
        before = client.get("/v1/webhook").json()
        response = _sent(client, "PUT", "/v1/webhook", f'{{"url": {token}}}')
        after = client.get("/v1/webhook").json()
    _assert_refused_as_invalid_json(response, "url")
    assert after == before


@pytest.mark.parametrize(
    ("times", "field"),
    [
        pytest.param("NaN", "times", id="times_nan"),
        pytest.param("[1e400]", "times[0]", id="times_overflow"),
        pytest.param('["03:00", -Infinity]', "times[1]", id="times_minus_infinity"),
    ],
)
def test_a_schedule_with_a_non_finite_number_is_invalid_json_and_unchanged(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent], times: str, field: str
) -> None:
    org = make_org()
    agent = make_agent(org)
    path = f"/v1/agents/{agent.agent_id}"
    with api.client(org.panel_key) as client:
        before = client.get(path).json()["schedule"]
        response = _sent(
            client, "PUT", f"{path}/schedule", f'{{"enabled": true, "times": {times}}}'
        )
        after = client.get(path).json()["schedule"]
    _assert_refused_as_invalid_json(response, field)
    assert after == before


def test_a_claim_with_a_non_finite_number_is_refused_before_the_answer_from_memory(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    del published
    agent = make_agent(make_org())
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        body = '{"slot_key": "2026-11-30T03:00", "from_version": NaN}'
        response = _sent(client, "POST", "/v1/agent/claims", body)
    _assert_refused_as_invalid_json(response, "from_version")


def test_a_huge_literal_is_named_shortened_never_echoed_whole(
    api: Api, make_org: Callable[..., Org]
) -> None:
    org = make_org()
    literal = "9" * 5000 + ".0"
    with api.client(org.panel_key) as client:
        response = _sent(client, "PUT", "/v1/webhook", f'{{"url": {literal}}}')
    _assert_refused_as_invalid_json(response, "url")
    assert len(response.text) < 1000


@pytest.mark.parametrize(
    "body",
    [
        pytest.param('{"url": "NaN"}', id="the_word_in_a_string"),
        pytest.param('{"url": "a: 1e400"}', id="an_exponent_in_a_string"),
        pytest.param('{"n": 1e-400}', id="an_underflow_is_zero_and_finite"),
        pytest.param('{"n": 1.7976931348623157e308}', id="the_largest_float"),
        pytest.param("url=NaN", id="a_form_is_not_json"),
    ],
)
def test_finite_numbers_and_look_alikes_pass_the_door(body: str) -> None:
    assert refused_json(body.encode()) is None


def test_a_nul_escape_and_a_non_finite_number_are_both_found_in_one_reading() -> None:
    assert refused_json(b'{"a": "x\\u0000"}') == (
        "a: contains a NUL character (\\u0000), which cannot be stored"
    )
    problem = refused_json(json.dumps({"a": "ok"}).encode()[:-1] + b', "b": [Infinity]}')
    assert problem is not None
    assert problem.startswith("b[0]: Infinity is not valid JSON")


@pytest.mark.parametrize("literal", NON_FINITE)
@pytest.mark.parametrize(
    "where",
    [
        pytest.param("{}", id="the_whole_body"),
        pytest.param(" \n{}", id="the_whole_body_after_blanks"),
        pytest.param("[1, {}]", id="in_a_list"),
        pytest.param('{{"n": {}}}', id="a_member"),
    ],
)
def test_a_non_finite_number_is_found_wherever_a_value_starts(where: str, literal: str) -> None:
    """The first value of the body has no `[`, `:` or `,` before it, and is looked for apart."""
    problem = refused_json(where.format(literal).encode())
    assert problem is not None
    assert "is not valid JSON" in problem
