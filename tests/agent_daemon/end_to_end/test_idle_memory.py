"""An idle daemon's memory bound: the real `nachtwacht agent run`, enrolled with a real control
plane and polling it every minute — over TLS with a private CA, and over plain http — peaks at no
more than 48 MiB of resident memory (VmHWM) while nothing is due.

The daemon runs on a Python that holds what a customer host installs (`customer_python`), not the
developer's environment. The figures themselves are printed by bench/agent_footprint.py."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agent_daemon.customer_python import customer_python
from tests.agent_daemon.network_support.fronts import control_plane_front
from tests.worlds.daemons import EVENT_DEADLINE_SECONDS, DaemonProcess, agent_environment
from tests.worlds.hosts import AgentHost
from tests.worlds.processes import REPO_ROOT

pytestmark = pytest.mark.slow

MAX_IDLE_PEAK_RSS = 48 * 2**20
# Product minutes the daemon polls with nothing to do (a real second each at 60x).
IDLE_MINUTES = 10


@pytest.fixture(scope="module")
def customer_interpreter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return customer_python(tmp_path_factory.mktemp("customer-venv"))


def start_daemon(python: Path, host: AgentHost, fake_clock: str) -> DaemonProcess:
    """`nachtwacht agent run` on `python`, its events read as they come."""
    stderr_path = host.root / "daemon.stderr"
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [
                str(python),
                "-m",
                "nachtwacht.cli",
                "agent",
                "run",
                "--state-dir",
                str(host.state_dir),
            ],
            env=agent_environment(NACHTWACHT_FAKE_CLOCK=fake_clock),
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    return DaemonProcess(process=process, stderr_path=stderr_path)


def test_the_customer_python_has_the_agents_packages_and_nothing_else(
    customer_interpreter: Path,
) -> None:
    found = subprocess.run(
        [str(customer_interpreter), "-c", "import httpx, apscheduler, cryptography; import rich"],
        env=agent_environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "No module named 'rich'" in found.stderr


def peak_rss(pid: int) -> int:
    """The highest resident set size of a live process so far, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"/proc/{pid}/status has no VmHWM line")


def test_peak_rss_reads_the_high_water_mark_of_a_live_process() -> None:
    assert peak_rss(os.getpid()) > 0


@pytest.fixture(scope="module")
def own_build_interpreter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The customer's Python placed as one of the updater's own builds: a daemon that can update
    itself (and so builds its self-updater, lazily)."""
    own_root = tmp_path_factory.mktemp("own-root")
    return customer_python(own_root / "versions" / "1.0.0" / "venv")


@pytest.mark.parametrize(
    ("tls", "own_build"),
    [
        pytest.param(True, False, id="tls_private_ca"),
        pytest.param(False, False, id="plain_http"),
        pytest.param(False, True, id="own_build"),
    ],
)
def test_an_idle_daemon_peaks_within_its_memory_bound(
    control_plane_server: Callable[..., Any],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    tls: bool,
    own_build: bool,
) -> None:
    python: Path = request.getfixturevalue(
        "own_build_interpreter" if own_build else "customer_interpreter"
    )
    # 04:30 in Amsterdam: the default 03:00 slot is ~22 product hours away, so every minute the
    # daemon polls the config and finds nothing due.
    fake_clock = f"2026-12-02T03:30:00Z,anchor={time.time():.1f},speed=60"
    plane = control_plane_server(fake_clock=fake_clock)
    org = plane.create_org("Acme")
    agent = plane.enroll_agent(org["org_id"], "idle-01")
    host = AgentHost(tmp_path / "host")
    plain_port = int(plane.base_url.rsplit(":", 1)[1])
    with control_plane_front(plain_port, tmp_path / "pki", tls=tls) as front:
        trust = ["--ca-file", str(front.ca_file)] if front.ca_file is not None else []
        enrolled = host.enroll(front.url, agent["agent_key"], *trust)
        assert enrolled.returncode == 0, enrolled.stderr
        daemon = start_daemon(python, host, fake_clock)
        try:
            daemon.wait_for("daemon.ready")
            daemon.wait_for("config.synced")
            wanted = front.polls + IDLE_MINUTES
            polls = front.wait_for_polls(wanted, timeout=EVENT_DEADLINE_SECONDS)
            assert polls >= wanted, f"{polls} config polls within the deadline, not {wanted}"
            assert daemon.process.poll() is None, daemon.stderr()
            peak = peak_rss(daemon.process.pid)
            # The verification code (and its native library) loads with the first update only,
            # also in a daemon that can update itself.
            maps = Path(f"/proc/{daemon.process.pid}/maps").read_text()
        finally:
            code = daemon.terminate()
    assert code == 0
    assert daemon.named("tick.failed") == [] and daemon.named("tick.crashed") == []
    assert bool(daemon.named("self_update.build")) is own_build
    assert bool(daemon.named("self_update.off")) is not own_build
    assert peak <= MAX_IDLE_PEAK_RSS, f"idle peak RSS {peak / 2**20:.1f} MiB"
    assert "/cryptography/" not in maps
