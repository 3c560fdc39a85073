"""`run_child` forks a command from a process that imported the command line once; the command is
still its own process: its environment, output, exit status and end are its own.

Real commands, a real fork server, a real PostgreSQL for the one that has to outlive its deadline.
"""

from __future__ import annotations

import multiprocessing
import time

import psycopg
import pytest

from nachtwacht.worlds import processes
from nachtwacht.worlds.processes import run_child

# A deadline for a state to be reached, not a speed expectation.
DEADLINE_SECONDS = 60.0


def test_each_command_has_the_environment_it_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # The caller's own nachtwacht settings never reach a child, however the fork server started.
    monkeypatch.setenv("NACHTWACHT_FAKE_CLOCK", "not an instant")
    june = run_child(
        "plan",
        "--times",
        "03:00",
        "--days",
        "1",
        env={"NACHTWACHT_FAKE_CLOCK": "2026-06-01T12:00:00Z"},
    )
    january = run_child(
        "plan",
        "--times",
        "03:00",
        "--days",
        "1",
        env={"NACHTWACHT_FAKE_CLOCK": "2027-01-05T12:00:00Z"},
    )
    assert (june.returncode, january.returncode) == (0, 0), (june.stderr, january.stderr)
    assert "Mon 2026-06-01" in june.stdout and "2027" not in june.stdout
    assert "Tue 2027-01-05" in january.stdout and "2026" not in january.stdout
    bad = run_child("plan", "--times", "03:00", env={"NACHTWACHT_FAKE_CLOCK": "garbage"})
    assert bad.returncode == 2
    assert bad.stdout == ""
    assert bad.stderr.startswith("nachtwacht plan: NACHTWACHT_FAKE_CLOCK: 'garbage'")


def test_output_and_exit_status_are_the_commands_own() -> None:
    unknown = run_child("frobnicate")
    assert unknown.returncode == 2
    assert unknown.stdout == ""
    assert "unknown command 'frobnicate'" in unknown.stderr
    version = run_child("--version")
    assert (version.returncode, version.stderr) == (0, "")
    assert version.stdout.startswith("nachtwacht ")


def test_without_a_fork_server_the_command_is_an_interpreter_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: ["fork", "spawn"])
    unknown = run_child("frobnicate")
    assert unknown.returncode == 2
    assert "unknown command 'frobnicate'" in unknown.stderr
    assert unknown.args[:3] == processes.nachtwacht_command()


def _other_sessions(database_url: str) -> int:
    with psycopg.connect(database_url, autocommit=True) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_command_that_outlives_its_deadline_is_killed(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `control serve` never ends by itself: given 3 seconds, it is killed, its connections close.
    monkeypatch.setattr(processes, "COMMAND_DEADLINE_SECONDS", 3.0)
    serve = ("control", "serve", "--port", "0", "--workers", "1", "--no-migrate")
    with pytest.raises(processes.subprocess.TimeoutExpired):
        run_child(*serve, "--database-url", database_url)
    deadline = time.monotonic() + DEADLINE_SECONDS
    while _other_sessions(database_url) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _other_sessions(database_url) == 0
