"""An attacker's pass over the agent's routes (`/v1/agent/...`): absurd and hostile values for
their fields — instants at the ends of the calendar with offsets that carry them past it, deeply
nested JSON, numbers beyond any column, wrong types, text PostgreSQL cannot hold, a body of a
megabyte. Each is a 4xx naming the field, never a 500, and nothing stored changes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.types import Pool
from tests.control_plane.api.conftest import JSON, AgentRequests
from tests.control_plane.conftest import Api, table_rows
from tests.worlds.clocks import ManualClock

NO_RUN = "/v1/agent/runs/00000000-0000-0000-0000-000000000000"
# Past the calendar once in UTC: year 1 at +14:00 is still year 0 there, 9999 at -14:00 is 10000.
BEFORE_ALL = "0001-01-01T00:00:00+14:00"
AFTER_ALL = "9999-12-31T23:59:59-14:00"
DEEP_LIST = "[" * 10_000 + "]" * 10_000
DEEP_OBJECT = '{"a":' * 10_000 + "1" + "}" * 10_000

# Every table an agent's request may write; a refused one leaves each as it was.
WATCHED = (
    "runs",
    "tokens",
    "events",
    "holds",
    "unreachable_reports",
    "claim_refusals",
    "agents",
)


def _unreachable(**changes: Any) -> str:
    body: dict[str, Any] = {
        "slot_key": "2026-11-30T03:00",
        "error": "cannot connect",
        "first_tried_at": "2026-11-30T02:01:00Z",
        "last_tried_at": "2026-11-30T02:14:00Z",
        "attempts": 14,
    }
    body.update(changes)
    return json.dumps(body)


# (method, path, raw JSON body, the field the refusal must name, the status)
HOSTILE = [
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(first_tried_at=BEFORE_ALL, last_tried_at=BEFORE_ALL),
        "first_tried_at",
        422,
        id="unreachable_try_before_the_calendar",
    ),
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(last_tried_at=AFTER_ALL),
        "last_tried_at",
        422,
        id="unreachable_try_after_the_calendar",
    ),
    pytest.param(
        "PUT", "/v1/agent/hold", f'{{"until": "{AFTER_ALL}"}}', "until", 422, id="hold_past_9999"
    ),
    pytest.param(
        "PUT", "/v1/agent/hold", f'{{"until": "{BEFORE_ALL}"}}', "until", 422, id="hold_before_1"
    ),
    pytest.param(
        "PATCH",
        NO_RUN,
        f'{{"status": "succeeded", "switched_at": "{AFTER_ALL}"}}',
        "switched_at",
        422,
        id="outcome_switched_past_9999",
    ),
    pytest.param(
        "PATCH",
        NO_RUN,
        f'{{"status": "succeeded", "switched_at": "{BEFORE_ALL}"}}',
        "switched_at",
        422,
        id="outcome_switched_before_1",
    ),
    pytest.param("POST", "/v1/agent/claims", DEEP_LIST, "body", 422, id="claim_deep_list"),
    pytest.param("POST", "/v1/agent/claims", DEEP_OBJECT, "body", 422, id="claim_deep_object"),
    pytest.param("POST", "/v1/agent/runs", DEEP_LIST, "body", 422, id="nothing_to_do_deep"),
    pytest.param("PATCH", NO_RUN, DEEP_OBJECT, "body", 422, id="outcome_deep"),
    pytest.param("POST", "/v1/agent/unreachable", DEEP_OBJECT, "body", 422, id="unreachable_deep"),
    pytest.param("PUT", "/v1/agent/hold", DEEP_LIST, "body", 422, id="hold_deep"),
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(attempts=10**30),
        "attempts",
        422,
        id="attempts_beyond_any_integer_column",
    ),
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(attempts=-1),
        "attempts",
        422,
        id="attempts_negative",
    ),
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(attempts=True),
        "attempts",
        422,
        id="attempts_a_switch",
    ),
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(attempts=1.5),
        "attempts",
        422,
        id="attempts_a_fraction",
    ),
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        _unreachable(error=["cannot connect"]),
        "error",
        422,
        id="error_a_list",
    ),
    # In an agent's error a lone surrogate is kept as its escape (`test_agent_text.py`); in a
    # version, which the door holds to storable text, it is refused.
    pytest.param(
        "PATCH",
        NO_RUN,
        '{"status": "failed", "version": "1.5\\ud800"}',
        "version",
        422,
        id="version_a_lone_surrogate",
    ),
    pytest.param(
        "PATCH",
        NO_RUN,
        '{"status": "failed", "error": {"nested": "x"}}',
        "error",
        422,
        id="outcome_error_an_object",
    ),
    pytest.param(
        "PATCH", NO_RUN, '{"status": "failed", "reason": 7}', "reason", 422, id="reason_a_number"
    ),
    pytest.param(
        "POST",
        "/v1/agent/claims",
        '{"slot_key": "2026-11-30T03:00", "from_version": ""}',
        "from_version",
        422,
        id="from_version_empty",
    ),
    pytest.param(
        "POST",
        "/v1/agent/claims",
        '{"slot_key": "2026-11-30T03:00", "manual_run_id": "00000000-0000-0000-0000-000000000000"}',
        "body",
        422,
        id="claim_names_both",
    ),
    pytest.param(
        "PUT",
        "/v1/agent/hold",
        '{"until": "2026-12-01T00:00:00Z", "reason": "' + "x" * 1_000_000 + '"}',
        "body",
        413,
        id="a_megabyte_string",
    ),
]


@pytest.mark.parametrize(("method", "path", "raw", "field", "status"), HOSTILE)
def test_a_hostile_agent_request_is_a_4xx_naming_the_field_and_changes_nothing(
    agent_requests: AgentRequests,
    pool: Pool,
    clock: ManualClock,
    method: str,
    path: str,
    raw: str,
    field: str,
    status: int,
) -> None:
    clock.set(datetime(2026, 11, 30, 2, 20, tzinfo=UTC))
    before = table_rows(pool, WATCHED)
    response = agent_requests.send(method, path, [JSON], raw.encode("utf-8"))
    assert response.status_code == status, response.text[:2000]
    message = response.json()["detail"]["message"]
    assert message.startswith(f"{field}: ") or f"{field}: " in message, message
    assert "Traceback" not in response.text
    assert table_rows(pool, WATCHED) == before


@pytest.mark.parametrize("text", [BEFORE_ALL, AFTER_ALL])
def test_the_trails_instant_past_the_calendar_is_a_422_naming_it(
    api: Api, operator_key: str, text: str
) -> None:
    with api.client(operator_key) as client:
        response = client.get("/v1/admin/events", params={"since": text})
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith("since: "), response.text


# (headers of a poll as raw bytes, the statuses it may get, the header a 422 must name)
HOSTILE_HEADERS = [
    pytest.param([(b"date", b"Fri, 31 Dec 9999 23:59:59 GMT")], 200, None, id="date_year_9999"),
    pytest.param([(b"date", b"Thu, 01 Jan 1970 00:00:00 GMT")], 200, None, id="date_1970"),
    pytest.param([(b"date", b"Wed, 31 Dec 1969 23:59:59 GMT")], 200, None, id="date_before_1970"),
    pytest.param([(b"date", b"Sun, 30 Feb 2026 03:00:00 GMT")], 200, None, id="date_no_such_day"),
    pytest.param([(b"date", b"x" * 8000)], 200, None, id="date_huge"),
    pytest.param([(b"date", b"Mon, 30 Nov 2026 02:01:00 GMT\xff")], 200, None, id="date_latin1"),
    pytest.param(
        [(b"date", b"Mon, 30 Nov 2026 02:01:00 GMT"), (b"date", b"Mon, 30 Nov 2026 02:01:00 GMT")],
        200,
        None,
        id="date_twice",
    ),
    pytest.param([(b"x-nachtwacht-trust-root", b"99999999999")], 200, None, id="root_huge"),
    pytest.param([(b"x-nachtwacht-trust-root", b"-1")], 200, None, id="root_negative"),
    pytest.param([(b"x-nachtwacht-trust-root", b"\xff\xfe")], 200, None, id="root_latin1"),
    pytest.param(
        [(b"x-nachtwacht-host-id", b"host-\xff\xfe-01")],
        422,
        "X-Nachtwacht-Host-Id",
        id="host_id_latin1",
    ),
    # Sent twice with two values, each a valid host id: which host answers would be a guess.
    pytest.param(
        [(b"x-nachtwacht-host-id", b"host-0001"), (b"x-nachtwacht-host-id", b"host-0002")],
        422,
        "X-Nachtwacht-Host-Id",
        id="host_id_twice",
    ),
    pytest.param([(b"if-none-match", b'"' + b"a" * 8000 + b'"')], 200, None, id="etag_huge"),
    pytest.param([(b"if-none-match", b"\xff")], 200, None, id="etag_latin1"),
]


@pytest.mark.parametrize(("headers", "status", "named"), HOSTILE_HEADERS)
def test_hostile_poll_headers_say_nothing_or_are_a_422_naming_the_header(
    agent_requests: AgentRequests,
    pool: Pool,
    headers: list[tuple[bytes, bytes]],
    status: int,
    named: str | None,
) -> None:
    response = agent_requests.send("GET", "/v1/agent/config", headers)
    assert response.status_code == status, response.text[:2000]
    if named is not None:
        assert response.json()["detail"]["message"].startswith(f"{named}: "), response.text
    with pool.connection() as conn:
        clocks = conn.execute("SELECT offset_seconds FROM agent_clocks").fetchall()
        roots = conn.execute("SELECT trust_root_version FROM agents").fetchall()
    # Only a readable, plausible Date is a host's clock; no held root is made up.
    if headers[0][1].startswith(b"Thu, 01 Jan 1970"):
        # Years off is a dead clock battery, not a made-up value: kept (within a hundred years).
        off = datetime(1970, 1, 1, tzinfo=UTC) - datetime(2026, 11, 30, 2, 1, tzinfo=UTC)
        assert [row["offset_seconds"] for row in clocks] == [round(off.total_seconds())]
    else:
        assert clocks == []
    assert roots == [{"trust_root_version": None}]
