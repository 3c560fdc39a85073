"""The panel's schedule endpoint: the API validator is the first layer of the time pattern, with
words a customer understands; the agent page shows the next slot in the platform's zone."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock

ALL_GRID_TIMES = [f"{h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)]

REFUSED = [
    pytest.param(True, [3], "times[0]", "times[0]: 3 is not a string", id="number"),
    pytest.param(True, [None], "times[0]", "times[0]: null is not a string", id="null"),
    pytest.param(True, [{"a": 1}], "times[0]", 'times[0]: {"a": 1} is not a string', id="object"),
    pytest.param(
        True, "03:00", "times", "times: '03:00' is not a list of times", id="string_not_array"
    ),
    pytest.param(
        True, [["03:00"]], "times[0]", 'times[0]: ["03:00"] is not a string', id="nested_array"
    ),
    pytest.param(
        True, ["3:00"], "times[0]", "times[0]: '3:00' is not a 24-hour time", id="single_digit"
    ),
    pytest.param(
        True,
        ["02:00", "03:07"],
        "times[1]",
        "times[1]: '03:07' is not on the five-minute grid (use HH:MM, e.g. 03:05)",
        id="off_grid",
    ),
    pytest.param(
        True, ["24:00"], "times[0]", "times[0]: '24:00' is not a 24-hour time", id="hour_24"
    ),
    pytest.param(
        True,
        ["03:00", "03:00"],
        "times[1]",
        "times[1]: '03:00' repeats times[0]",
        id="duplicate",
    ),
    pytest.param(True, [], "times", "times: [] is empty", id="empty_when_enabled"),
    pytest.param(
        True,
        [*ALL_GRID_TIMES, "00:00"],
        "times",
        "more than the 288 five-minute slots",
        id="289_entries",
    ),
]


@pytest.mark.parametrize(("enabled", "times", "field", "message"), REFUSED)
def test_bad_schedule_gets_422_naming_field_index_and_value(
    api: Api,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    enabled: bool,
    times: Any,
    field: str,
    message: str,
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as client:
        response = client.put(
            f"/v1/agents/{agent.agent_id}/schedule", json={"enabled": enabled, "times": times}
        )
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert detail["code"] == "invalid_schedule"
        assert detail["field"] == field
        assert message in detail["message"]
        # Nothing was stored.
        page = client.get(f"/v1/agents/{agent.agent_id}").json()
    assert page["schedule"] == {"enabled": True, "times": ["03:00"]}


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({"enabled": "yes", "times": ["03:00"]}, id="enabled_string"),
        pytest.param({"enabled": 1, "times": ["03:00"]}, id="enabled_number"),
        pytest.param({"times": ["03:00"]}, id="enabled_missing"),
        pytest.param({"enabled": True}, id="times_missing"),
        pytest.param({"enabled": True, "times": ["03:00"], "zone": "UTC"}, id="unknown_field"),
    ],
)
def test_malformed_schedule_body_gets_422_naming_the_field(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent], body: Any
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as client:
        response = client.put(f"/v1/agents/{agent.agent_id}/schedule", json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail["code"] == "invalid_request"
    named = {problem["field"] for problem in detail["errors"]}
    assert named & {"enabled", "times", "zone"}


def test_times_are_stored_sorted(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as client:
        response = client.put(
            f"/v1/agents/{agent.agent_id}/schedule",
            json={"enabled": True, "times": ["23:55", "03:00", "13:30"]},
        )
        assert response.status_code == 200
        assert response.json()["schedule"]["times"] == ["03:00", "13:30", "23:55"]
        listed = client.get("/v1/agents").json()["agents"]
    assert listed[0]["schedule"] == {"enabled": True, "times": ["03:00", "13:30", "23:55"]}


def test_schedule_can_be_switched_off_with_no_times(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as client:
        response = client.put(
            f"/v1/agents/{agent.agent_id}/schedule", json={"enabled": False, "times": []}
        )
    assert response.status_code == 200
    assert response.json()["schedule"] == {"enabled": False, "times": []}
    assert response.json()["next_slot"] is None


@pytest.mark.parametrize(
    ("now", "times", "key", "local", "at"),
    [
        pytest.param(
            datetime(2026, 11, 30, 1, 0, tzinfo=UTC),
            ["03:00"],
            "2026-11-30T03:00",
            "2026-11-30T03:00:00+01:00",
            "2026-11-30T02:00:00Z",
            id="winter_cet",
        ),
        pytest.param(
            datetime(2026, 7, 1, 2, 0, tzinfo=UTC),
            ["03:00"],
            "2026-07-02T03:00",
            "2026-07-02T03:00:00+02:00",
            "2026-07-02T01:00:00Z",
            id="summer_cest_after_today_slot",
        ),
        pytest.param(
            datetime(2027, 3, 27, 23, 0, tzinfo=UTC),
            ["02:30"],
            "2027-03-28T02:30",
            "2027-03-28T03:30:00+02:00",
            "2027-03-28T01:30:00Z",
            id="spring_gap_0230",
        ),
    ],
)
def test_agent_page_shows_next_slot_in_the_platform_zone(
    api: Api,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    now: datetime,
    times: list[str],
    key: str,
    local: str,
    at: str,
) -> None:
    clock.set(now)
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as client:
        client.put(f"/v1/agents/{agent.agent_id}/schedule", json={"enabled": True, "times": times})
        page = client.get(f"/v1/agents/{agent.agent_id}").json()
    assert page["next_slot"] == {
        "key": key,
        "local_time": local,
        "timezone": "Europe/Amsterdam",
        "at": at,
    }
    assert page["name"] == "web-01"
    assert page["latest_runs"] == []
