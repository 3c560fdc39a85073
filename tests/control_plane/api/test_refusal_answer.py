"""A refusal's answer is written with one encoder for every refusal: its body and headers must
be, byte for byte, those of the `JSONResponse` they replaced (agents and panels parse them)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from starlette.responses import JSONResponse

from control_plane.api.answers import refusal_response
from control_plane.claims.caps import org_cap_full
from control_plane.errors import InvalidInput, NotFound, RequestRefused, Unauthenticated

AT_03_00_30 = datetime(2026, 11, 30, 2, 0, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(org_cap_full(AT_03_00_30, 5), id="the_herds_org_cap"),
        pytest.param(InvalidInput("name", "Zürich " * 40, "is too long"), id="non_ascii_value"),
        pytest.param(InvalidInput("n", 2**80, "is too large"), id="a_huge_number"),
        pytest.param(NotFound("agent 1 does not exist", code="agent_not_found"), id="a_code"),
        pytest.param(Unauthenticated("no bearer credential"), id="a_message_alone"),
    ],
)
def test_a_refusal_has_the_body_and_headers_of_its_json_response(refused: RequestRefused) -> None:
    answer = refusal_response(refused)
    as_before = JSONResponse(json.loads(answer.body), status_code=refused.status)
    assert answer.status_code == as_before.status_code
    assert bytes(answer.body) == bytes(as_before.body)
    assert answer.raw_headers == as_before.raw_headers
