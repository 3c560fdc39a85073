"""An attacker's pass over the agent's routes (`/v1/agent/...`): absurd and hostile values for
their fields — instants at the ends of the calendar with offsets that carry them past it, deeply
nested JSON, numbers beyond any column, wrong types, text PostgreSQL cannot hold, a body of a
megabyte. Each is a 4xx naming the field, never a 500, and nothing stored changes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
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
    import json

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
    pytest.param(
        "POST",
        "/v1/agent/unreachable",
        '{"slot_key": "2026-11-30T03:00", "error": "a\\ud800b", "first_tried_at":'
        ' "2026-11-30T02:01:00Z", "last_tried_at": "2026-11-30T02:14:00Z", "attempts": 1}',
        "error",
        422,
        id="error_a_lone_surrogate",
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


def _snapshot(pool: Pool) -> dict[str, list[str]]:
    with pool.connection() as conn:
        return {
            table: sorted(
                str(row["r"])
                for row in conn.execute(f"SELECT row_to_json(t)::text AS r FROM {table} t")  # noqa: S608
            )
            for table in WATCHED
        }


@pytest.mark.parametrize(("method", "path", "raw", "field", "status"), HOSTILE)
def test_a_hostile_agent_request_is_a_4xx_naming_the_field_and_changes_nothing(
    api: Api,
    pool: Pool,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    method: str,
    path: str,
    raw: str,
    field: str,
    status: int,
) -> None:
    del published
    agent = make_agent(make_org())
    clock.set(datetime(2026, 11, 30, 2, 20, tzinfo=UTC))
    before = _snapshot(pool)
    with api.client(agent.agent_key) as client:
        response = client.request(
            method, path, content=raw.encode("utf-8"), headers={"Content-Type": "application/json"}
        )
    assert response.status_code == status, response.text[:2000]
    message = response.json()["detail"]["message"]
    assert message.startswith(f"{field}: ") or f"{field}: " in message, message
    assert "Traceback" not in response.text
    assert _snapshot(pool) == before


@pytest.mark.parametrize("text", [BEFORE_ALL, AFTER_ALL])
def test_the_trails_instant_past_the_calendar_is_a_422_naming_it(
    api: Api, operator_key: str, text: str
) -> None:
    with api.client(operator_key) as client:
        response = client.get("/v1/admin/events", params={"since": text})
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith("since: "), response.text
