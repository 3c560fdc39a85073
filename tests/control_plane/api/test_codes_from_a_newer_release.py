"""A code a newer release recorded (a replica already upgraded, during a rolling upgrade) is read
back by this one as it is: the agent's runs answer 200 with the text, the panel words it "reason
unknown" — never a 500 for the run, nor for the page that lists it.

A newer release widens the database's CHECK before it writes such a value; the test does the same.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from control_plane.panel.wording import outcome_reason
from control_plane.runs.views import latest_runs
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org

NEWER = "solar_flare"


@pytest.fixture
def org(make_org: Callable[..., Org]) -> Org:
    return make_org()


@pytest.fixture
def agent(org: Org, make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(org, "web-01")


# The CHECK a newer release would have widened before writing each column's new value.
_CHECKS = {
    "outcome_reason": "ALTER TABLE runs DROP CONSTRAINT runs_outcome_reason_known",
    "miss_reason": "ALTER TABLE runs DROP CONSTRAINT runs_miss_reason_known",
    "patch_fallback_reason": "ALTER TABLE runs DROP CONSTRAINT runs_patch_fallback_reason_known",
}


def _run_of_a_newer_release(database_url: str, agent: Agent, **codes: str) -> None:
    at = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    with psycopg.connect(database_url, autocommit=True) as conn:
        for column in codes:
            conn.execute(_CHECKS[column])
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, created_at,"
            " finished_at, outcome_reason, miss_reason, patch_fallback_reason)"
            " VALUES (%s, %s, 'schedule', '2026-11-30T03:00', %s, %s, %s, %s, %s, %s, %s)",
            [
                agent.agent_id,
                agent.org_id,
                at,
                "missed" if "miss_reason" in codes else "failed",
                at,
                at,
                codes.get("outcome_reason"),
                codes.get("miss_reason"),
                codes.get("patch_fallback_reason"),
            ],
        )


@pytest.mark.parametrize(
    ("codes", "field"),
    [
        pytest.param({"outcome_reason": NEWER}, "reason", id="outcome_reason"),
        pytest.param({"miss_reason": NEWER}, "miss_reason", id="miss_reason"),
        pytest.param({"patch_fallback_reason": NEWER}, "patch_fallback_reason", id="fallback"),
    ],
)
def test_a_code_this_release_does_not_know_is_read_as_it_is(
    api: Api, org: Org, agent: Agent, database_url: str, codes: dict[str, str], field: str
) -> None:
    _run_of_a_newer_release(database_url, agent, **codes)
    with api.client(org.panel_key) as client:
        answer = client.get(f"/v1/agents/{agent.agent_id}/runs")
    assert answer.status_code == 200, answer.text
    body: Any = answer.json()
    runs = body["runs"] if isinstance(body, dict) else body
    assert [run[field] for run in runs] == [NEWER]


def test_the_panel_words_an_unknown_outcome_reason_as_unknown(
    agent: Agent, database_url: str, pool: Pool
) -> None:
    _run_of_a_newer_release(database_url, agent, outcome_reason=NEWER)
    with pool.connection() as conn:
        (run,) = latest_runs(conn, agent.agent_id, 10)
    assert run.reason == NEWER

    class English:
        def gettext(self, message: str) -> str:
            return message

    assert outcome_reason(English(), run.reason) == "reason unknown"  # type: ignore[arg-type]
