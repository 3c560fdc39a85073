"""Text an agent sends (a run's error, an unreachable report's error) is what it saw: never lost
to a refusal, never obeyed where it is read. A control character in it — an escape sequence that
would rewrite an operator's terminal through the command line, a NUL PostgreSQL's text cannot
hold — is stored as its visible escape (`\\u001b`); newline and tab stay. Nothing else changes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from control_plane.types import Pool
from ground.contract.messages import MAX_MESSAGE_LENGTH
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"

SENT = "health check: \x1b[2J\x1b[Hall is well\x00 \x9b31m\x7f\r\nline two\tend"
STORED = (
    "health check: \\u001b[2J\\u001b[Hall is well\\u0000 \\u009b31m\\u007f\\u000d\nline two\tend"
)


def _failed(error: str) -> dict[str, str]:
    return {"status": "failed", "error": error}


def _claimed(api: Api, agent: Agent) -> str:
    with api.client(agent.agent_key) as client:
        claimed = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    assert claimed.status_code == 201, claimed.text
    run_id: str = claimed.json()["run_id"]
    return run_id


def _rows(pool: Pool, run_id: str) -> dict[str, Any]:
    with pool.connection() as conn:
        run = conn.execute(
            "SELECT status, error, outcome_reason, version FROM runs WHERE id = %s", [run_id]
        ).fetchone()
        others = conn.execute("SELECT count(*) AS n FROM runs WHERE id <> %s", [run_id]).fetchone()
    assert run is not None and others is not None
    return {**run, "other_runs": others["n"]}


@pytest.fixture
def world(
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> tuple[Org, Agent]:
    del published
    org = make_org()
    agent = make_agent(org)
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    return org, agent


def test_a_run_error_with_control_characters_and_a_nul_is_kept_inert(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    org, agent = world
    run_id = _claimed(api, agent)
    with api.client(agent.agent_key) as client:
        reported = client.patch(f"/v1/agent/runs/{run_id}", json=_failed(SENT))
    assert reported.status_code == 200, reported.text
    assert reported.json()["error"] == STORED
    assert _rows(pool, run_id) == {
        "status": "failed",
        "error": STORED,
        "outcome_reason": None,
        "version": None,
        "other_runs": 0,
    }
    with api.client(org.panel_key) as panel:
        page = panel.get(f"/v1/agents/{agent.agent_id}").json()
    assert page["latest_runs"][0]["error"] == STORED
    # The same report again is the same outcome: the stored text is what it is compared with.
    with api.client(agent.agent_key) as client:
        again = client.patch(f"/v1/agent/runs/{run_id}", json=_failed(SENT))
    assert again.status_code == 200, again.text
    assert _rows(pool, run_id)["error"] == STORED


def test_an_escape_sequence_in_a_run_error_reaches_no_reader_as_itself(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    org, agent = world
    run_id = _claimed(api, agent)
    with api.client(agent.agent_key) as client:
        reported = client.patch(
            f"/v1/agent/runs/{run_id}", json={"status": "failed", "error": "\x1b]0;pwned\x07ok"}
        )
    assert reported.status_code == 200, reported.text
    assert _rows(pool, run_id)["error"] == "\\u001b]0;pwned\\u0007ok"
    with api.client(org.panel_key) as panel:
        runs = panel.get(f"/v1/agents/{agent.agent_id}/runs").json()["runs"]
    assert [run["error"] for run in runs] == ["\\u001b]0;pwned\\u0007ok"]


def test_a_run_error_the_escapes_make_too_long_is_cut_within_its_limit(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    _, agent = world
    run_id = _claimed(api, agent)
    sent = "\x00" * 100 + "x" * (MAX_MESSAGE_LENGTH - 100)
    with api.client(agent.agent_key) as client:
        reported = client.patch(f"/v1/agent/runs/{run_id}", json=_failed(sent))
    assert reported.status_code == 200, reported.text
    error = _rows(pool, run_id)["error"]
    assert len(error) <= MAX_MESSAGE_LENGTH
    assert error.startswith("\\u0000" * 100) and error.endswith("x…")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        pytest.param("version", "1.5\x00", id="version"),
        pytest.param("updater_version", "1.4\x00", id="updater_version"),
        pytest.param("status", "failed\x00", id="status"),
        pytest.param("reason", "health_check\x00", id="reason"),
    ],
)
def test_a_nul_in_another_field_of_the_outcome_is_a_422_naming_it(
    api: Api, pool: Pool, world: tuple[Org, Agent], field: str, value: str
) -> None:
    _, agent = world
    run_id = _claimed(api, agent)
    before = _rows(pool, run_id)
    body = {"status": "failed", "error": "x", field: value}
    with api.client(agent.agent_key) as client:
        reported = client.patch(f"/v1/agent/runs/{run_id}", json=body)
    assert reported.status_code == 422, reported.text
    assert reported.json()["detail"]["message"].startswith(f"{field}: "), reported.text
    assert _rows(pool, run_id) == before


def test_a_nul_in_a_key_of_the_outcome_is_still_a_422(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    _, agent = world
    run_id = _claimed(api, agent)
    before = _rows(pool, run_id)
    with api.client(agent.agent_key) as client:
        reported = client.patch(
            f"/v1/agent/runs/{run_id}", json={"status": "failed", "error\x00": "x"}
        )
    assert reported.status_code == 422, reported.text
    assert _rows(pool, run_id) == before


def test_a_nul_in_the_error_of_a_run_that_is_not_there_is_a_404_not_a_500(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    _, agent = world
    with api.client(agent.agent_key) as client:
        reported = client.patch(
            "/v1/agent/runs/00000000-0000-0000-0000-000000000000", json=_failed("disk\x00full")
        )
    assert reported.status_code == 404, reported.text
    assert reported.json()["detail"]["code"] == "run_not_found"
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM runs").fetchone() == {"n": 0}


def test_versions_an_agent_sends_are_kept_inert_too(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    # A build whose `--version` prints an escape sequence, or an agent that lies: the versions
    # are shown on the operators' terminals (the agent list, the runs) and in the panel.
    _, agent = world
    with api.client(agent.agent_key) as client:
        claimed = client.post(
            "/v1/agent/claims",
            json={
                "slot_key": SLOT,
                "from_version": "1.4\x1b[2J",
                "updater_version": "0.9\x9b1m",
            },
        )
        assert claimed.status_code == 201, claimed.text
        run_id = claimed.json()["run_id"]
        reported = client.patch(
            f"/v1/agent/runs/{run_id}",
            json={
                "status": "succeeded",
                "version": "1.5.0\x1b]0;x\x07",
                "updater_version": "1\x7f",
            },
        )
    assert reported.status_code == 200, reported.text
    with pool.connection() as conn:
        run = conn.execute(
            "SELECT from_version, version FROM runs WHERE id = %s", [run_id]
        ).fetchone()
        kept = conn.execute(
            "SELECT a.current_version, uv.version AS updater_version FROM agents a"
            " LEFT JOIN agent_updater_versions uv ON uv.agent_id = a.id WHERE a.id = %s",
            [agent.agent_id],
        ).fetchone()
    assert run == {"from_version": "1.4\\u001b[2J", "version": "1.5.0\\u001b]0;x\\u0007"}
    assert kept == {"current_version": "1.5.0\\u001b]0;x\\u0007", "updater_version": "1\\u007f"}
    assert reported.json()["version"] == "1.5.0\\u001b]0;x\\u0007"


def test_a_version_in_a_nothing_to_do_report_is_kept_inert(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    _, agent = world
    with api.client(agent.agent_key) as client:
        reported = client.post(
            "/v1/agent/runs",
            json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0\x1b[8m"},
        )
    assert reported.status_code == 201, reported.text
    with pool.connection() as conn:
        run = conn.execute("SELECT version FROM runs").fetchone()
    assert run == {"version": "1.5.0\\u001b[8m"}


def test_a_lone_surrogate_in_a_run_error_is_kept_as_its_escape(
    api: Api, pool: Pool, world: tuple[Org, Agent]
) -> None:
    # A file name that is not UTF-8, as Python decodes it (surrogateescape), in the error of a
    # failed swap: sent by JSON as a lone surrogate, which no storable text can hold.
    _, agent = world
    run_id = _claimed(api, agent)
    raw = '{"status": "failed", "error": "cannot rename /opt/app/\\udcff.tmp"}'
    with api.client(agent.agent_key) as client:
        reported = client.patch(
            f"/v1/agent/runs/{run_id}",
            content=raw.encode("ascii"),
            headers={"Content-Type": "application/json"},
        )
    assert reported.status_code == 200, reported.text
    assert _rows(pool, run_id)["error"] == "cannot rename /opt/app/\\udcff.tmp"
