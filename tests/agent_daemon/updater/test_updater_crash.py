"""The updater SIGKILLed (a real subprocess) at every step boundary, then restarted: it finishes or
undoes the update, and at every moment `current` names exactly one complete version."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agent_daemon.updater.layout import InstallLayout
from tests.agent_daemon.updater_support.host import REPO, SUPPORT, Host, host_running
from tests.worlds.releases import Release

pytestmark = pytest.mark.slow


def run_updater(host: Host, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    settings = host.settings
    job = {
        "install_root": str(settings.install_root),
        "state_dir": str(settings.state_dir),
        "public_key": str(host.write_trusted_key()),
        "restart_command": list(settings.restart_command),
        "health_command": list(settings.health_command),
        "health_deadline_seconds": settings.health_deadline_seconds,
        **job,
    }
    path = host.base / "job.json"
    path.write_text(json.dumps(job))
    return subprocess.run(
        [sys.executable, str(SUPPORT / "run_updater.py"), str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def apply_job(host: Host, release: Release, run_id: str) -> dict[str, Any]:
    request = host.request(release, run_id)
    return {
        "mode": "apply",
        "request": {
            "run_id": run_id,
            "manifest": base64.b64encode(request.manifest).decode(),
            "signature": base64.b64encode(request.signature).decode(),
            "artifact_url": request.artifact_url,
        },
    }


def assert_current_names_one_complete_version(host: Host) -> str:
    layout = InstallLayout(host.install_root)
    version = layout.link_target("current")
    assert version is not None, f"current -> {host.current()!r} is not a complete version"
    return version


def kill_then_resume(
    host: Host, release: Release, kill_at: str, occurrence: int = 1
) -> dict[str, Any] | None:
    job = apply_job(host, release, "run-crash")
    killed = run_updater(host, {**job, "kill_at": kill_at, "kill_occurrence": occurrence})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert_current_names_one_complete_version(host)
    resumed = run_updater(host, {"mode": "resume"})
    assert resumed.returncode == 0, resumed.stderr
    outcome: dict[str, Any] | None = json.loads(resumed.stdout)
    assert_current_names_one_complete_version(host)
    return outcome


@pytest.mark.parametrize(
    ("kill_at", "occurrence"),
    [
        pytest.param("accepted", 1, id="after_accept_before_download"),
        pytest.param("downloaded", 1, id="after_download_before_install"),
        pytest.param("installed", 1, id="after_install_before_switch"),
        pytest.param("switching", 1, id="switch_recorded_links_untouched"),
        pytest.param("between_links", 1, id="previous_replaced_current_not_yet"),
        pytest.param("switched", 1, id="switched_before_restart"),
    ],
)
def test_killed_during_an_update_resume_finishes_it(
    tmp_path: Path, kill_at: str, occurrence: int
) -> None:
    with host_running(tmp_path) as host:
        outcome = kill_then_resume(host, host.factory.release("1.5.0", 42), kill_at, occurrence)
        assert outcome is not None
        assert {k: outcome[k] for k in ("status", "version", "error", "run_id", "reason")} == {
            "status": "succeeded", "version": "1.5.0", "error": None, "run_id": "run-crash",
            "reason": None,
        }  # fmt: skip
        assert host.current() == "versions/1.5.0"
        assert host.previous() == "versions/1.4.1"
        assert host.running_version() == "1.5.0"
        assert host.state()["in_progress"] is None


def test_killed_after_the_commit_there_is_nothing_left_to_resume(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        outcome = kill_then_resume(host, host.factory.release("1.5.0", 42), "committed")
        assert outcome is None
        assert host.running_version() == "1.5.0"
        assert host.state()["last_outcome"]["status"] == "succeeded"


@pytest.mark.parametrize(
    ("kill_at", "occurrence"),
    [
        pytest.param("rolling_back", 1, id="rollback_recorded"),
        pytest.param("between_links", 2, id="rollback_half_switched"),
        pytest.param("links_restored", 1, id="links_restored_before_restart"),
    ],
)
def test_killed_during_a_rollback_resume_completes_the_rollback(
    tmp_path: Path, kill_at: str, occurrence: int
) -> None:
    with host_running(tmp_path) as host:
        host.settings = replace(host.settings, health_deadline_seconds=3.0)
        release = host.factory.release("1.5.0", 42, "never-healthy")
        outcome = kill_then_resume(host, release, kill_at, occurrence)
        assert outcome is not None
        assert (outcome["status"], outcome["version"]) == ("rolled_back", "1.4.1")
        assert host.current() == "versions/1.4.1"
        assert host.running_version() == "1.4.1"
        assert "1.5.0" in host.state()["bad_versions"]
