from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from nachtwacht.demo_world.demo_agent import Fault, build_demo_agent
from tests.worlds.waiting import wait_until


def unpack(tmp_path: Path, version: str, fault: Fault = "none") -> Path:
    artifact = build_demo_agent(tmp_path / f"{version}.tar.gz", version=version, fault=fault)
    root = tmp_path / f"unpacked-{version}-{fault}"
    with tarfile.open(artifact) as archive:
        archive.extractall(root, filter="data")
    return root / "bin/provibr-agent"


def test_the_build_prints_its_version(tmp_path: Path) -> None:
    agent = unpack(tmp_path, "1.5.0")
    assert os.access(agent, os.X_OK)
    result = subprocess.run([agent, "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "1.5.0"


def test_two_builds_of_one_version_are_identical(tmp_path: Path) -> None:
    first = build_demo_agent(tmp_path / "a.tar.gz", version="1.5.0").read_bytes()
    assert build_demo_agent(tmp_path / "b.tar.gz", version="1.5.0").read_bytes() == first


def test_the_wrong_version_fault_fails_a_self_test(tmp_path: Path) -> None:
    agent = unpack(tmp_path, "1.5.0", "wrong-version")
    result = subprocess.run([agent, "--version"], capture_output=True, text=True, check=True)
    assert result.stdout.strip() != "1.5.0"


def health(agent: Path, heartbeat: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [agent, "health", "--heartbeat", str(heartbeat)], capture_output=True, text=True
    )


def wait_for_health(agent: Path, heartbeat: Path) -> subprocess.CompletedProcess[str]:
    """The first healthy answer, once the service has written its first heartbeat."""

    def healthy() -> subprocess.CompletedProcess[str] | None:
        result = health(agent, heartbeat)
        return result if result.returncode == 0 else None

    return wait_until(healthy, what="the service's first heartbeat", interval=0.1)


def test_health_reports_the_running_service_version_and_fails_once_it_stops(
    tmp_path: Path,
) -> None:
    agent = unpack(tmp_path, "1.5.0")
    heartbeat = tmp_path / "run/heartbeat.json"
    service = subprocess.Popen([agent, "run", "--heartbeat", str(heartbeat)])
    try:
        assert wait_for_health(agent, heartbeat).stdout.strip() == "1.5.0"
    finally:
        service.terminate()
        service.wait()
    result = subprocess.run(
        [agent, "health", "--heartbeat", str(heartbeat)], capture_output=True, text=True
    )
    assert result.returncode == 1
    assert "unhealthy" in result.stderr


@pytest.mark.parametrize("fault", ["never-healthy", "crash"])
def test_broken_builds_never_report_healthy(tmp_path: Path, fault: Fault) -> None:
    agent = unpack(tmp_path, "1.5.0", fault)
    heartbeat = tmp_path / "heartbeat.json"
    service = subprocess.Popen([agent, "run", "--heartbeat", str(heartbeat)])
    try:
        if fault == "crash":
            assert service.wait() == 1
        else:
            # Asked once the service certainly ran its loop: no heartbeat ever appears.
            subprocess.run([agent, "--version"], check=True, capture_output=True)
            assert service.poll() is None
        result = subprocess.run(
            [agent, "health", "--heartbeat", str(heartbeat)], capture_output=True, text=True
        )
        assert result.returncode == 1
    finally:
        if service.poll() is None:
            service.terminate()
        service.wait()
