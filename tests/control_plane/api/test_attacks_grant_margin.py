"""The grant margin at its extremes, over HTTP: a margin one second short of the window leaves one
second to be granted in, and a margin changed in the middle of the night applies to the next claim
(every worker's remembered facts are forgotten with the settings).

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"


def _claim(api: Api, agent: Agent) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})


def _settings(api: Api, operator_key: str, **fields: int) -> None:
    with api.client(operator_key) as client:
        answer = client.put("/v1/admin/settings", json=fields)
    assert answer.status_code == 200, answer.text


@pytest.mark.parametrize(
    ("now", "status"),
    [
        pytest.param(datetime(2026, 11, 30, 2, 0, tzinfo=UTC), 201, id="at_the_slot"),
        pytest.param(datetime(2026, 11, 30, 2, 0, 0, 999999, tzinfo=UTC), 201, id="its_one_second"),
        pytest.param(datetime(2026, 11, 30, 2, 0, 1, tzinfo=UTC), 409, id="after_it"),
    ],
)
def test_a_margin_one_second_short_of_the_window_grants_in_its_first_second_only(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    now: datetime,
    status: int,
) -> None:
    _settings(api, operator_key, grant_margin_seconds=899)
    clock.set(now)
    answer = _claim(api, make_agent(make_org()))
    assert answer.status_code == status, answer.text
    if status == 409:
        assert answer.json()["detail"]["code"] == "window_closed"


def test_a_margin_widened_during_the_night_refuses_the_next_claim(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    first, second = make_agent(org, "web-01"), make_agent(org, "web-02")
    clock.set(datetime(2026, 11, 30, 2, 10, tzinfo=UTC))
    assert _claim(api, first).status_code == 201
    _settings(api, operator_key, grant_margin_seconds=600)
    refused = _claim(api, second)
    assert refused.status_code == 409
    assert "no token is granted in its last 600 s" in refused.json()["detail"]["message"]
    # The grant already made stands: asked again, it is given back.
    assert _claim(api, first).status_code == 200
