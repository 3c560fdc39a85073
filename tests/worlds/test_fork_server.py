"""`run_child` forks a command from a process that imported the command line once, and
`start_control_plane` forks `control serve` from it: each is still its own process — its
environment, output, exit status and end are its own, and it is signalled and waited for as an
interpreter started by `subprocess` is.

Real commands, a real fork server, a real PostgreSQL for the one that has to outlive its deadline.
"""

from __future__ import annotations

import multiprocessing
import signal
import subprocess
from pathlib import Path

import httpx
import psycopg
import pytest

from nachtwacht.demo_world import children
from nachtwacht.demo_world.control_planes import start_control_plane
from tests.worlds import processes
from tests.worlds.processes import FORKED, ForkedProcess, run_child
from tests.worlds.waiting import wait_until

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
    monkeypatch.setattr(children, "COMMAND_DEADLINE_SECONDS", 3.0)
    serve = ("control", "serve", "--port", "0", "--workers", "1", "--no-migrate")
    with pytest.raises(subprocess.TimeoutExpired):
        run_child(*serve, "--database-url", database_url)
    wait_until(
        lambda: _other_sessions(database_url) == 0,
        what="the killed server's connections to close",
        timeout=DEADLINE_SECONDS,
        interval=0.1,
    )


def test_a_forked_server_is_signalled_and_waited_for_as_a_process(
    database_url: str, tmp_path: Path
) -> None:
    stderr_path = tmp_path / "serve.log"
    plane = start_control_plane(
        stderr_path=stderr_path,
        database_url=database_url,
        args=["--no-migrate"],
        launcher=FORKED,
    )
    process = plane.process
    assert isinstance(process, ForkedProcess)
    assert process.poll() is None
    assert httpx.get(plane.base_url + "/healthz", timeout=30).status_code == 200
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL
    assert process.poll() == -signal.SIGKILL
    process.send_signal(signal.SIGTERM)  # an ended process is no error, as with Popen
    with pytest.raises(httpx.TransportError):
        httpx.get(plane.base_url + "/healthz", timeout=5)
    plane.detach()


def test_a_forked_server_stopped_cleanly_says_so_in_its_log(
    database_url: str, tmp_path: Path
) -> None:
    stderr_path = tmp_path / "serve.log"
    stderr_path.write_text("an earlier line\n")
    plane = start_control_plane(
        stderr_path=stderr_path,
        database_url=database_url,
        args=["--no-migrate"],
        launcher=FORKED,
    )
    assert plane.stop() == 0
    log = stderr_path.read_text()
    assert log.startswith("an earlier line\n")  # appended to, as the interpreter's was
    assert "nachtwacht control plane stopped" in log
