"""Issue 16, footprint: an idle daemon holds only what its minute needs. What only an update needs
(the updater, its download, install and verification code, the manifest parser, the build archive
code, `cryptography`) is loaded when an update runs, never at start or by an idle minute; what the
daemon never uses (APScheduler's asyncio, process pools and tzlocal, httpx's idna, httpcore's
anyio, truststore on Linux, the platform's default directories, the config writer) is never
loaded at all.

The real daemon runs against a real control plane on a fast fake clock, through a 03:00 slot with
nothing to install; Python itself lists every module the process imported
(`PYTHONPROFILEIMPORTTIME`, the environment form of `-X importtime`, on stderr)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from nachtwacht.demo_world.clocks import NightClock
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow

UPDATE_ONLY_MODULES = (
    "cryptography",
    "agent_daemon.updater.updater",
    "agent_daemon.updater.step_machine",
    "agent_daemon.updater.switching",
    "agent_daemon.updater.step_recorder",
    "agent_daemon.updater.download",
    "agent_daemon.updater.download_answer",
    "agent_daemon.updater.download_staging",
    "agent_daemon.updater.download_watchdog",
    "agent_daemon.updater.download_writer",
    "agent_daemon.updater.install",
    "agent_daemon.updater.verify",
    "agent_daemon.updater.build_command",
    "agent_daemon.updater.managed_service",
    "signed_release.artifact",
    "signed_release.build_archive",
    "signed_release.keys",
    "signed_release.manifest",
    "signed_release.signature",
)
# What the daemon never uses: APScheduler's imports for executors and checks it does not run,
# httpx's `idna` for hosts outside ASCII and httpcore's `anyio` for async (lean_imports),
# truststore (on Linux the OS store is read by os_trust), the platform's default directories (a
# service has its state directory), the config writer (only `enroll` writes) and the modules of
# `enroll`, `status` and the host verbs (`agent_daemon.cli` imports each with its verb).
NEVER_USED_MODULES = (
    "asyncio",
    "concurrent.futures.process",
    "multiprocessing",
    "tzlocal",
    "idna",
    "anyio",
    "truststore",
    "platformdirs",
    "tomli_w",
    "agent_daemon.status",
    "agent_daemon.host_commands",
    "agent_daemon.enroll_cli",
    "agent_daemon.status_cli",
    "agent_daemon.host_verbs_cli",
)
# What every idle minute does need: proof that the import list is complete enough to judge by.
IDLE_MODULES = ("httpx", "pydantic", "apscheduler", "agent_daemon.daemon", "agent_daemon.wire")


def imported_modules(stderr: str) -> set[str]:
    """The modules named by `-X importtime` lines (`import time: self | cumulative | name`)."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "cumulative" not in line
    }


def loaded(modules: set[str], package: str) -> list[str]:
    return sorted(m for m in modules if m == package or m.startswith(f"{package}."))


def test_imported_modules_reads_the_importtime_lines() -> None:
    stderr = (
        "import time: self [us] | cumulative | imported package\n"
        "import time:       120 |        120 |   cryptography.x509\n"
        "!!! FAKE CLOCK !!!\n"
        "import time:       300 |        420 | cryptography\n"
    )
    assert imported_modules(stderr) == {"cryptography", "cryptography.x509"}


def test_an_idle_daemon_imports_nothing_only_an_update_needs(
    control_plane_server: Callable[..., Any], tmp_path: Path
) -> None:
    # 02:58 in Amsterdam (UTC+1 in November): the default 03:00 slot opens two minutes in, and
    # with no release published it is "already up to date" — the slot is handled, nothing updated.
    # Held at 02:58 while the world is set up (on a loaded machine that takes longer than the
    # slot's whole window at 60x); it runs from the daemon's start.
    clock = NightClock.held(
        datetime(2026, 11, 30, 1, 58, tzinfo=UTC), begins=tmp_path / "clock", speed=60.0
    )
    fake_clock = clock.setting
    plane = control_plane_server(fake_clock=fake_clock)
    org = plane.create_org("Acme")
    agent = plane.enroll_agent(org["org_id"], "idle-01")
    host = AgentHost(tmp_path / "host")
    enrolled = host.enroll(plane.base_url, agent["agent_key"], "--request-timeout-seconds", "300")
    assert enrolled.returncode == 0, enrolled.stderr

    clock.begin()
    daemon = host.start(fake_clock=fake_clock, extra_env={"PYTHONPROFILEIMPORTTIME": "1"})
    try:
        daemon.wait_for("daemon.ready")
        daemon.wait_for("slot.up_to_date", slot_key="2026-11-30T03:00")
        # A few more idle minutes after the slot (one product minute is a real second here).
        time.sleep(4)
        assert daemon.process.poll() is None
    finally:
        code = daemon.terminate()
    assert code == 0
    modules = imported_modules(daemon.stderr())
    for needed in IDLE_MODULES:
        assert loaded(modules, needed), f"{needed} missing from the import list"
    for package in UPDATE_ONLY_MODULES:
        assert loaded(modules, package) == [], f"an idle daemon imported {package}"
    for package in NEVER_USED_MODULES:
        assert loaded(modules, package) == [], f"an idle daemon imported {package}"
