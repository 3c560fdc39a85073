"""The database goes away partway: its backend ended (`pg_terminate_backend`) while a statement
waits, or the whole server stopped. A `nachtwacht control` command then says one line and exits 1;
the API answers 503 with the contract's error body. Never a trace, never half a change: a
transaction happened or it did not. Once the database answers again the same server serves,
without a restart. The rows are compared before and after."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import psycopg
import pytest

from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, table_rows
from tests.worlds.clocks import ManualClock
from tests.worlds.processes import REPO_ROOT, child_environment, nachtwacht_command
from tests.worlds.waiting import wait_until

DEADLINE_SECONDS = 30.0
SLOT = "2026-11-30T03:00"
# Every table the requests and commands below may write.
WATCHED = ("platform_brake", "runs", "tokens", "events", "agents", "holds", "claim_refusals")


def _waiting_pid(watcher: psycopg.Connection, statement: str) -> int | None:
    """The backend of the other session whose statement holding `statement` waits on a lock."""
    row = watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND query ILIKE %s",
        [f"%{statement}%"],
    ).fetchone()
    return None if row is None else int(row[0])


def _ended_while_waiting(
    database_url: str, lock: str, statement: str, start: Callable[[], object]
) -> None:
    """Hold `lock`, `start` what will wait behind it, and end its backend while it waits."""
    with (
        psycopg.connect(database_url, autocommit=True) as holder,
        psycopg.connect(database_url, autocommit=True) as watcher,
        holder.transaction(),
    ):
        holder.execute(lock)
        start()
        pid = wait_until(
            lambda: _waiting_pid(watcher, statement),
            what=f"a statement with {statement!r} waiting",
            timeout=DEADLINE_SECONDS,
        )
        watcher.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])


@pytest.mark.parametrize(
    ("command", "table", "prog"),
    [
        pytest.param(
            ["brake", "engage", "--reason", "disk full on the canaries"],
            "platform_brake",
            "brake",
            id="brake_engage",
        ),
        pytest.param(["create-org", "Acme"], "orgs", "create-org", id="create_org"),
        pytest.param(
            ["create-operator-key", "--name", "night"],
            "credentials",
            "create-operator-key",
            id="operator_key",
        ),
        pytest.param(["after-restore"], "tokens", "after-restore", id="after_restore"),
    ],
)
def test_a_command_whose_backend_is_ended_says_one_line_and_changes_nothing(
    database_url: str, pool: Pool, command: list[str], table: str, prog: str
) -> None:
    watched = (*WATCHED, "orgs", "credentials", "answer_changes", "restored_timelines")
    before = table_rows(pool, watched)
    running: list[subprocess.Popen[str]] = []

    def start() -> None:
        running.append(
            subprocess.Popen(
                nachtwacht_command("control", *command, "--database-url", database_url),
                env=child_environment(),
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )

    _ended_while_waiting(database_url, f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE", table, start)
    [process] = running
    try:
        stdout, stderr = process.communicate(timeout=DEADLINE_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, (process.returncode, stdout, stderr)
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"nachtwacht control {prog}: the database went away partway"), lines
    assert stdout == ""
    assert table_rows(pool, watched) == before


def _unavailable(response: httpx.Response) -> None:
    """The contract's 503: its error body, no trace."""
    assert response.status_code == 503, response.text[:2000]
    detail = response.json()["detail"]
    assert detail["code"] == "database_unavailable", detail
    assert detail["message"], detail
    assert "Traceback" not in response.text


@pytest.fixture
def claimed(
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> tuple[Agent, str]:
    """An agent, enrolled before the night, whose 03:00 claim was granted at 03:01."""
    del published
    agent = make_agent(make_org())
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        granted = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    assert granted.status_code == 201, granted.text
    return agent, str(granted.json()["run_id"])


def _report(api: Api, agent: Agent, run_id: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.patch(
            f"/v1/agent/runs/{run_id}",
            json={"status": "succeeded", "version": "1.5.0", "switched_at": "2026-11-30T02:03:00Z"},
        )


def _send_while_its_backend_is_ended(
    database_url: str, lock: str, statement: str, send: Callable[[], httpx.Response]
) -> httpx.Response:
    answered: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: answered.append(send()), daemon=True)
    _ended_while_waiting(database_url, lock, statement, thread.start)
    thread.join(DEADLINE_SECONDS)
    assert not thread.is_alive()
    [response] = answered
    return response


def test_a_report_whose_backend_is_ended_is_a_503_and_is_recorded_once_when_sent_again(
    api: Api, pool: Pool, database_url: str, claimed: tuple[Agent, str]
) -> None:
    agent, run_id = claimed
    before = table_rows(pool, WATCHED)
    response = _send_while_its_backend_is_ended(
        database_url,
        "LOCK TABLE runs IN ACCESS EXCLUSIVE MODE",
        "runs",
        lambda: _report(api, agent, run_id),
    )
    _unavailable(response)
    assert table_rows(pool, WATCHED) == before
    # The agent sends its report again (it keeps it on disk until delivered): served at once.
    again = _report(api, agent, run_id)
    assert again.status_code == 200, again.text[:2000]
    with pool.connection() as conn:
        rows = conn.execute("SELECT status FROM runs WHERE id = %s", [run_id]).fetchall()
        events = conn.execute(
            "SELECT count(*) AS n FROM events WHERE data->>'run_id' = %s", [run_id]
        ).fetchone()
    assert [row["status"] for row in rows] == ["succeeded"]
    assert events is not None
    assert _report(api, agent, run_id).status_code == 200
    with pool.connection() as conn:
        after = conn.execute(
            "SELECT count(*) AS n FROM events WHERE data->>'run_id' = %s", [run_id]
        ).fetchone()
    assert after == events


def test_a_poll_whose_backend_is_ended_is_a_503_or_served_and_the_next_is_served(
    api: Api, pool: Pool, database_url: str, claimed: tuple[Agent, str]
) -> None:
    agent, _ = claimed
    before = table_rows(pool, WATCHED)

    def poll() -> httpx.Response:
        with api.client(agent.agent_key) as client:
            return client.get("/v1/agent/config", headers={"X-Nachtwacht-Host-Id": "host-0001"})

    response = _send_while_its_backend_is_ended(
        database_url, "LOCK TABLE agents IN ACCESS EXCLUSIVE MODE", "agents", poll
    )
    _unavailable(response)
    assert table_rows(pool, WATCHED) == before
    served = poll()
    assert served.status_code == 200, served.text[:2000]
