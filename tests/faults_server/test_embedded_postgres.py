"""The embedded PostgreSQL under faults, with real processes: `control serve`
SIGKILLed and restarted, PostgreSQL stopped under a running server.

No timed assertions: the loops below wait for a state with a generous deadline, and the HTTP
client's timeout is a deadline for a request that hangs (the defect: ~30 s), not a speed claim.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from control_plane.config import DatabaseLocation, ServeSettings, pool_wait_seconds
from control_plane.database import (
    MAX_POOL_WAIT_SECONDS,
    POOL_WAIT_SECONDS,
    ensure_server_user,
    forget_dead_handles,
    process_exists,
)
from control_plane.errors import ConfigurationError
from ground.contract import CONFIG_PATH, AnswerCode
from tests.conftest import RunningControlPlane
from tests.worlds.waiting import wait_until

# A deadline for a state to be reached, not a speed expectation.
DEADLINE_SECONDS = 60.0
# Well under the pool's old 30 s wait, well over the bounded one.
REQUEST_DEADLINE_SECONDS = 20.0


def _postmaster_pid(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (FileNotFoundError, IndexError, ValueError):
        return None


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what=what, timeout=DEADLINE_SECONDS, interval=0.1)


@pytest.fixture
def pgdata(embedded_data_dir: Path) -> Iterator[Path]:
    """The embedded server's data directory; whatever PostgreSQL a failed test leaves is ended."""
    path = embedded_data_dir / "postgres"
    yield path
    pid = _postmaster_pid(path)
    if pid is not None and process_exists(pid):
        os.kill(pid, signal.SIGINT)
        _wait_until(lambda: not process_exists(pid), "the left-over PostgreSQL to stop")


def test_a_clean_stop_after_a_sigkill_and_restart_leaves_no_postgres_running(
    control_plane_server: Callable[..., RunningControlPlane],
    embedded_data_dir: Path,
    pgdata: Path,
) -> None:
    first = control_plane_server(data_dir=embedded_data_dir)
    postgres = _postmaster_pid(pgdata)
    assert postgres is not None and process_exists(postgres)
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    first.detach()
    assert process_exists(postgres)  # killed: it could not let go
    second = control_plane_server(data_dir=embedded_data_dir)
    assert _postmaster_pid(pgdata) == postgres  # attached to the server left running
    assert json.loads((pgdata / ".handle_pids.json").read_text()) == [second.pid]
    assert second.stop() == 0
    assert not process_exists(postgres)
    assert _postmaster_pid(pgdata) is None


def test_forgetting_dead_handles_keeps_the_living_ones(tmp_path: Path) -> None:
    handles = tmp_path / ".handle_pids.json"
    gone = os.fork()
    if gone == 0:
        os._exit(0)
    os.waitpid(gone, 0)
    handles.write_text(json.dumps([os.getpid(), gone]))
    assert forget_dead_handles(tmp_path) == [gone]
    assert json.loads(handles.read_text()) == [os.getpid()]


def test_a_zombie_is_no_live_process() -> None:
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        _wait_until(lambda: not process_exists(child), "the child to become a zombie")
    finally:
        os.waitpid(child, 0)


@pytest.mark.slow
def test_requests_answer_database_unavailable_while_postgres_is_down(
    control_plane_server: Callable[..., RunningControlPlane],
    embedded_data_dir: Path,
    pgdata: Path,
) -> None:
    server = control_plane_server(data_dir=embedded_data_dir)
    org = server.create_org("Acme")
    agent = server.enroll_agent(org["org_id"], "web-01")
    headers = {"Authorization": f"Bearer {agent['agent_key']}"}
    with httpx.Client(
        base_url=server.base_url, headers=headers, timeout=REQUEST_DEADLINE_SECONDS
    ) as client:
        assert client.get(CONFIG_PATH).status_code == 200
        postgres = _postmaster_pid(pgdata)
        assert postgres is not None
        os.kill(postgres, signal.SIGINT)  # PostgreSQL's fast shutdown
        _wait_until(lambda: not process_exists(postgres), "PostgreSQL to stop")

        # The answer memory may answer a config poll for FRESHNESS_SECONDS after its last good
        # read of the change feed (docs/control_plane.md "Hot path"), and only from memory: a
        # 200 until then, and from the first 503 on every request meets the database's absence.
        def past_the_memory() -> bool:
            status = client.get(CONFIG_PATH).status_code
            assert status in {200, 503}, status
            return status == 503

        _wait_until(past_the_memory, "the answer memory's bound to pass")
        # The first request may meet a broken pooled connection; the later ones wait for the
        # pool to give them one, which is the wait that must be bounded.
        for _ in range(4):
            response = client.get(CONFIG_PATH)
            assert response.status_code == 503, response.text
            assert response.json()["detail"]["code"] == AnswerCode.DATABASE_UNAVAILABLE.value
        # Back again (an admin command starts it), the same server answers without a restart.
        server.create_org("Beta")

        def answers() -> bool:
            return client.get(CONFIG_PATH).status_code == 200

        _wait_until(answers, "the control plane to answer again")
    assert server.stop() == 0
    pid = _postmaster_pid(pgdata)
    assert pid is None or not process_exists(pid)


def test_the_pool_wait_is_a_few_seconds_by_default() -> None:
    settings = ServeSettings(database=DatabaseLocation(url="postgresql:///x"))
    assert settings.pool_wait_seconds == POOL_WAIT_SECONDS <= 5


@pytest.mark.parametrize("seconds", [0, -1, MAX_POOL_WAIT_SECONDS + 1])
def test_a_pool_wait_out_of_range_is_refused_naming_the_flag(seconds: float) -> None:
    with pytest.raises(ConfigurationError, match="--pool-wait-seconds"):
        ServeSettings(database=DatabaseLocation(url="postgresql:///x"), pool_wait_seconds=seconds)


@pytest.mark.parametrize("raw", ["0", "-1", "61"])
def test_a_pool_wait_out_of_range_in_the_environment_is_refused_naming_the_variable(
    raw: str,
) -> None:
    # Under systemd only the variable is set: the flag would name something nobody typed.
    with pytest.raises(ConfigurationError) as refused:
        pool_wait_seconds(None, {"NACHTWACHT_POOL_WAIT_SECONDS": raw})
    assert str(refused.value) == (
        f"NACHTWACHT_POOL_WAIT_SECONDS: {raw!r} is out of range "
        "(expected more than 0 and at most 60)"
    )


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("not json", id="garbage"),
        pytest.param('{"pid": 1}', id="not_a_list"),
    ],
)
def test_an_unreadable_handle_list_is_left_as_it_is(tmp_path: Path, content: str) -> None:
    handles = tmp_path / ".handle_pids.json"
    handles.write_text(content)
    assert forget_dead_handles(tmp_path) == []
    assert handles.read_text() == content


def test_no_handle_list_is_nothing_to_forget(tmp_path: Path) -> None:
    assert forget_dead_handles(tmp_path) == []


# Each process imports first, says so, then waits for the go file, so all of them reach `useradd`
# together.
_MAKE_USER = """
import pathlib, pwd, sys, time
from control_plane.database import ensure_server_user
print("imported", flush=True)
go = pathlib.Path(sys.argv[2])
while not go.exists():
    time.sleep(0.001)
ensure_server_user(sys.argv[1])
print(pwd.getpwnam(sys.argv[1]).pw_uid)
"""


def _users_named(name: str) -> list[str]:
    lines = Path("/etc/passwd").read_text().splitlines()
    return [line for line in lines if line.split(":", 1)[0] == name]


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None,
    reason="the embedded server runs as a user of its own only when started by root",
)
def test_the_servers_user_is_made_once_by_processes_starting_together(tmp_path: Path) -> None:
    """On a fresh host, every test worker (or `serve` beside an admin command) starts its server at
    once. Unlocked, `useradd` made the user several times with several uids, and a process
    holding an overwritten uid failed in `initdb`. A throw-away name stands for pgserver's."""
    name = f"nwtest{secrets.token_hex(4)}"
    go = tmp_path / "go"
    makers = [
        subprocess.Popen(
            [sys.executable, "-c", _MAKE_USER, name, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    try:
        for maker in makers:
            assert maker.stdout is not None
            assert maker.stdout.readline().strip() == "imported", maker.stderr
        go.touch()
        answers = [maker.communicate(timeout=DEADLINE_SECONDS) for maker in makers]
        assert [maker.returncode for maker in makers] == [0] * 8, [err for _, err in answers]
        entries = _users_named(name)
        assert len(entries) == 1, entries
        uid = entries[0].split(":")[2]
        assert [out.strip() for out, _ in answers] == [uid] * 8
    finally:
        for maker in makers:
            maker.kill()
        for _ in range(8):  # unlocked, the same name was made up to eight times
            if not _users_named(name):
                break
            subprocess.run(["userdel", name], check=False, capture_output=True)


def test_as_another_user_no_user_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    name = f"nwtest{secrets.token_hex(4)}"
    ensure_server_user(name)
    assert _users_named(name) == []
