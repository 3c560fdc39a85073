"""A customer host in a temporary directory for the updater's tests: the world kit's host
(`tests.worlds.hosts.AgentHost`) with its managed agent under the kit's supervisor, a real
loopback artifact server and a release factory with its own key."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater import Updater
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.clock import Clock, SystemClock
from nachtwacht.demo_world.supervisor import ServiceSupervisor
from tests.worlds.artifact_server import ArtifactServer, artifact_server
from tests.worlds.hosts import AgentHost
from tests.worlds.releases import Release, ReleaseFactory

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[2]


@dataclass(kw_only=True)
class Host:
    base: Path
    agent: AgentHost
    factory: ReleaseFactory
    server: ArtifactServer
    settings: UpdaterSettings

    @property
    def install_root(self) -> Path:
        return self.settings.install_root

    @property
    def state_dir(self) -> Path:
        return self.settings.state_dir

    @property
    def heartbeat(self) -> Path:
        return self.agent.heartbeat

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
        """The version the supervised agent reports, asked until it reports one (its health command
        is the only way to learn it); 60 s is a deadline for a failure, not a speed bound."""
        deadline = time.monotonic() + 60
        while (version := self.agent.running_version()) is None:
            assert time.monotonic() < deadline, "the supervised agent never reported a version"
            time.sleep(0.1)
        return version

    def versions_on_disk(self) -> list[str]:
        return sorted(p.name for p in (self.install_root / "versions").iterdir())

    def write_trusted_key(self) -> Path:
        return self.factory.write_public_key(self.base / "release.pub")

    def state(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.state_dir / "updater-state.json").read_text())
        return data


@contextmanager
def customer_host(base: Path, *, health_deadline_seconds: float = 60.0) -> Iterator[Host]:
    """A host with nothing installed yet and the supervisor waiting for a `current` build."""
    factory = ReleaseFactory(workdir=base / "builds")
    agent = AgentHost(base)
    agent.prepare()
    supervisor = ServiceSupervisor()
    supervisor.add(agent)
    supervisor.start()
    try:
        settings = agent.updater_settings(
            factory.trusted, health_deadline_seconds=health_deadline_seconds
        )
        with artifact_server() as server:
            yield Host(base=base, agent=agent, factory=factory, server=server, settings=settings)
    finally:
        supervisor.close()


@contextmanager
def host_running(base: Path, version: str = "1.4.1", manifest_version: int = 41) -> Iterator[Host]:
    """A host whose agent runs `version`, installed by the updater itself."""
    with customer_host(base) as host:
        outcome = host.apply(host.factory.release(version, manifest_version), "initial-install")
        assert outcome.status == "succeeded", outcome.error
        assert host.running_version() == version
        yield host
