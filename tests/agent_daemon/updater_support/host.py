"""A customer host in a temporary directory: an install root, the updater's state directory, the
managed agent under a real supervisor process, a real loopback artifact server and a release key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives import serialization

from agent_daemon.updater import UpdateOutcome, Updater, UpdateRequest, UpdaterSettings
from ground.clock import Clock, SystemClock
from tests.agent_daemon.updater_support.artifact_server import ArtifactServer, artifact_server
from tests.agent_daemon.updater_support.releases import Release, ReleaseFactory

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[2]


@dataclass(kw_only=True)
class Host:
    base: Path
    factory: ReleaseFactory
    server: ArtifactServer
    supervisor: subprocess.Popen[bytes]
    settings: UpdaterSettings

    @property
    def install_root(self) -> Path:
        return self.settings.install_root

    @property
    def state_dir(self) -> Path:
        return self.settings.state_dir

    @property
    def heartbeat(self) -> Path:
        return self.base / "run/heartbeat.json"

    def updater(self, *, clock: Clock | None = None, **overrides: Any) -> Updater:
        settings = replace(self.settings, **overrides) if overrides else self.settings
        return Updater(settings=settings, client=httpx.Client(), clock=clock or SystemClock())

    def request(self, release: Release, run_id: str, **serving: Any) -> UpdateRequest:
        url = self.server.serve(f"/v1/agent/runs/{run_id}/artifact", release.artifact, **serving)
        return UpdateRequest(
            run_id=run_id,
            manifest=release.manifest_bytes,
            signature=release.signature,
            artifact_url=url,
        )

    def apply(self, release: Release, run_id: str, **serving: Any) -> UpdateOutcome:
        return self.updater().apply(self.request(release, run_id, **serving))

    def current(self) -> str | None:
        try:
            return os.readlink(self.install_root / "current")
        except FileNotFoundError:
            return None

    def previous(self) -> str | None:
        try:
            return os.readlink(self.install_root / "previous")
        except FileNotFoundError:
            return None

    def running_version(self) -> str:
        """The version the supervised agent reports, waiting until it reports one (the test's
        timeout bounds the wait)."""
        while True:
            result = subprocess.run(
                [self.install_root / "current/bin/provibr-agent", "health",
                 "--heartbeat", str(self.heartbeat)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if result.returncode == 0:
                return result.stdout.strip()
            time.sleep(0.1)

    def versions_on_disk(self) -> list[str]:
        return sorted(p.name for p in (self.install_root / "versions").iterdir())

    def write_trusted_key(self) -> Path:
        path = self.base / "release.pub"
        path.write_bytes(
            self.factory.key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return path

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.state_dir / "updater-state.json").read_text())
        return data


@contextmanager
def customer_host(base: Path, *, health_deadline_seconds: float = 60.0) -> Iterator[Host]:
    """A host with nothing installed yet and the supervisor waiting for a `current` build."""
    install_root = base / "opt/provibr-agent"
    install_root.mkdir(parents=True)
    (base / "run").mkdir()
    pidfile = base / "supervisor.pid"
    supervisor = subprocess.Popen(
        [sys.executable, str(SUPPORT / "supervisor.py"), str(install_root),
         str(base / "run/heartbeat.json"), str(pidfile)],
    )  # fmt: skip
    try:
        while not pidfile.exists() or not pidfile.read_text().strip():
            time.sleep(0.02)
        factory = ReleaseFactory(workdir=base / "builds")
        factory.workdir.mkdir()
        settings = UpdaterSettings(
            install_root=install_root,
            state_dir=base / "var/lib/nachtwacht-agent",
            trusted_keys=factory.trusted,
            platform="linux-x86_64",
            channel="stable",
            restart_command=("kill", "-HUP", str(supervisor.pid)),
            health_command=(
                str(install_root / "current/bin/provibr-agent"),
                "health",
                "--heartbeat",
                str(base / "run/heartbeat.json"),
            ),
            health_deadline_seconds=health_deadline_seconds,
            health_poll_seconds=0.2,
        )
        with artifact_server() as server:
            yield Host(
                base=base, factory=factory, server=server, supervisor=supervisor, settings=settings
            )
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait()


@contextmanager
def host_running(base: Path, version: str = "1.4.1", manifest_version: int = 41) -> Iterator[Host]:
    """A host whose agent runs `version`, installed by the updater itself."""
    with customer_host(base) as host:
        outcome = host.apply(host.factory.release(version, manifest_version), "initial-install")
        assert outcome.status == "succeeded", outcome.error
        assert host.running_version() == version
        yield host
