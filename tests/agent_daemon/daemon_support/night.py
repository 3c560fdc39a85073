"""One night for a small fleet, end to end: a real control plane process on the embedded
PostgreSQL, real `nachtwacht agent run` processes, real signed builds made with
`nachtwacht release`, real install roots with the managed agent under a supervisor — all on one
fast fake clock. Every part comes from the world kit (`tests.worlds`).

Time: every process gets the same `NACHTWACHT_FAKE_CLOCK`. A held clock (`NightClock.held`)
stands at its start while the test sets the world up (control plane, builds, hosts) and runs from
the moment the first daemon starts (or the test first waits for an instant); a clock made with
`NightClock.starting` runs from an anchor a fixed lead in the real future instead. Tests wait for
*product* instants, never for real durations.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from agent_daemon.settings import render_config, write_config
from nachtwacht.demo_world.clocks import NightClock
from nachtwacht.demo_world.hosts import preinstall
from nachtwacht.demo_world.release_tooling import sign_build
from nachtwacht.demo_world.supervisor import ServiceSupervisor
from signed_release.keys import generate_key_files, load_private_key
from tests.worlds.artifact_server import artifact_server
from tests.worlds.daemons import DaemonProcess
from tests.worlds.hosts import AgentHost
from tests.worlds.releases import ReleaseFactory

__all__ = ["Host", "Night", "NightClock", "events_json", "local"]

AMSTERDAM = ZoneInfo("Europe/Amsterdam")
# Product seconds: generous, because a product minute is two real seconds on a shared machine.
HEALTH_DEADLINE_SECONDS = "1800"
REQUEST_TIMEOUT_SECONDS = "300"
# The download's own limits, also product seconds, were left at their defaults (30 s without
# data): one real second at 30x, a quarter at 120x. With the suite running in parallel the
# control plane sometimes paused longer than that and the night failed as a stalled download.
# A stall is a property of the network, in real seconds: these keep 20 s (30x) and 5 s (120x).
DOWNLOAD_LIMITS = {"download_read_timeout_seconds": 600.0, "download_deadline_seconds": 86400.0}


def local(text: str) -> datetime:
    """`2026-11-30T02:50` in Europe/Amsterdam as an aware UTC instant (fold=0: the first)."""
    return datetime.fromisoformat(text).replace(tzinfo=AMSTERDAM).astimezone(UTC)


@dataclass
class Host:
    """One customer host: its agent in the control plane, its folders and its daemons."""

    name: str
    agent_id: str
    agent: AgentHost
    clock_setting: str
    # Lets a held night clock run; the first daemon started begins the night.
    begin: Callable[[], None] = lambda: None
    daemons: list[DaemonProcess] = field(default_factory=list)

    @property
    def daemon(self) -> DaemonProcess:
        return self.daemons[-1]

    def start(self, *, clock_setting: str | None = None) -> DaemonProcess:
        self.begin()
        self.daemons.append(self.agent.start(fake_clock=clock_setting or self.clock_setting))
        return self.daemon

    def current_version(self) -> str | None:
        return self.agent.current_version()

    def installed_versions(self) -> list[str]:
        return self.agent.installed_versions()

    def running_version(self) -> str | None:
        return self.agent.running_version()


@dataclass
class Night:
    """The control plane, the release key and builds, and the hosts of one test."""

    root: Path
    clock: NightClock
    start_control_plane: Callable[..., Any]
    control_plane_args: tuple[str, ...] = ()
    # A second release key (`keys_dir_b`) the control plane accepts too: the key a trust root
    # rotates to.
    second_release_key: bool = False
    exits: ExitStack = field(default_factory=ExitStack)
    hosts: list[Host] = field(default_factory=list)
    # The URL hosts are enrolled with when it is not the control plane's own (a load balancer).
    agents_url: str | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True)
        self.keys_dir = self.root / "release-keys"
        _, self.public_key, _ = generate_key_files(self.keys_dir)
        accepted = [str(self.public_key)]
        if self.second_release_key:
            self.keys_dir_b = self.root / "release-keys-b"
            accepted.append(str(generate_key_files(self.keys_dir_b)[1]))
        self.env = {"NACHTWACHT_RELEASE_PUBLIC_KEYS": ",".join(accepted)}
        self.plane = self.start_control_plane(
            fake_clock=self.clock.setting, env=self.env, args=list(self.control_plane_args)
        )
        org = self.plane.create_org("Acme")
        self.org_id: str = org["org_id"]
        self.panel = httpx.Client(
            base_url=self.plane.base_url,
            headers={"Authorization": f"Bearer {org['panel_key']}"},
            timeout=60,
        )
        self.operator = httpx.Client(
            base_url=self.plane.base_url,
            headers={"Authorization": f"Bearer {self.plane.create_operator_key()}"},
            timeout=60,
        )
        self.factory = ReleaseFactory(
            workdir=self.root / "builds",
            key=load_private_key(self.keys_dir / "release.key"),
            issued_at=self.clock.start - timedelta(days=2),
        )
        self.supervisor = ServiceSupervisor()
        self.supervisor.start()
        self.exits.callback(self.supervisor.close)

    # -- the control plane --------------------------------------------------------------------

    def restart_control_plane(self) -> None:
        self.plane = self.start_control_plane(
            fake_clock=self.clock.setting,
            env=self.env,
            args=list(self.control_plane_args),
        )

    def publish(
        self,
        version: str,
        manifest_version: int,
        *,
        channel: str = "stable",
        fault: str = "none",
        stage: str | None = None,
        allow_downgrade: bool = False,
        keys_dir: Path | None = None,
        bases: tuple[Path, ...] = (),
    ) -> None:
        """Build, sign and publish with the real release tooling and the control plane's CLI
        (`fault`: a deliberately broken build; `stage`: `publish-release --stage`;
        `allow_downgrade`: signed and published as a rollback release; `keys_dir`: signed with
        another release key than the night's)."""
        build = sign_build(
            version=version,
            manifest_version=manifest_version,
            keys_dir=keys_dir or self.keys_dir,
            workdir=self.root,
            clock_setting=self.clock.setting,
            channel=channel,
            fault=fault,
            launcher=self.plane.launcher,
            allow_downgrade=allow_downgrade,
            bases=bases,
        )
        self.plane.publish_release(build, stage=stage, allow_downgrade=allow_downgrade)

    def set_brake(self, engaged: bool) -> None:
        answer = self.operator.put(
            "/v1/admin/brake",
            json={"engaged": engaged, "reason": "e2e test", "revoke_outstanding": True},
        )
        assert answer.status_code == 200, answer.text

    def set_schedule(self, host: Host, times: list[str]) -> None:
        answer = self.panel.put(
            f"/v1/agents/{host.agent_id}/schedule", json={"enabled": True, "times": times}
        )
        assert answer.status_code == 200, answer.text

    def agent_page(self, host: Host) -> dict[str, Any]:
        answer = self.panel.get(f"/v1/agents/{host.agent_id}")
        assert answer.status_code == 200, answer.text
        page: dict[str, Any] = answer.json()
        return page

    def runs(self, host: Host) -> list[dict[str, Any]]:
        answer = self.panel.get(f"/v1/agents/{host.agent_id}/runs")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        runs: list[dict[str, Any]] = body["runs"] if isinstance(body, dict) else body
        return runs

    # -- hosts --------------------------------------------------------------------------------

    def add_host(
        self,
        name: str,
        *,
        installed: tuple[str, int] | None = ("1.4.1", 41),
        channel: str = "stable",
        enroll_args: tuple[str, ...] = (),
    ) -> Host:
        enrolled = self.plane.enroll_agent(self.org_id, name)
        agent = AgentHost(self.root / name, keys_dir=self.keys_dir)
        agent.prepare()
        self.supervisor.add(agent)
        if installed is not None:
            self._preinstall(agent, *installed)
        result = agent.enroll(
            self.agents_url or self.plane.base_url,
            enrolled["agent_key"],
            "--restart-command", " ".join(agent.restart_command),
            "--health-command", " ".join(agent.health_command),
            "--health-deadline-seconds", HEALTH_DEADLINE_SECONDS,
            "--request-timeout-seconds", REQUEST_TIMEOUT_SECONDS,
            "--channel", channel, *enroll_args,
            env={"NACHTWACHT_FAKE_CLOCK": self.clock.setting},
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        _add_to_config(agent.state_dir / "agent.toml", DOWNLOAD_LIMITS)
        host = Host(
            name=name,
            agent_id=enrolled["agent_id"],
            agent=agent,
            clock_setting=self.clock.setting,
            begin=self.clock.begin,
        )
        self.hosts.append(host)
        return host

    def configure(self, host: Host, **fields: float) -> None:
        """Set `agent.toml` fields of a host (before its daemon starts), as an admin would."""
        _add_to_config(host.agent.state_dir / "agent.toml", fields)

    def _preinstall(self, agent: AgentHost, version: str, manifest_version: int) -> None:
        """The version the host runs before the night, installed by the updater itself."""
        release = self.factory.release(version, manifest_version)
        with artifact_server() as server:
            preinstall(
                agent,
                manifest=release.manifest_bytes,
                signature=release.signature,
                artifact_url=server.serve("/preinstall", release.artifact),
                trusted_keys=self.factory.trusted,
                # At real speed: the pre-install is not part of the test.
                before_night=self.clock.start,
            )

    def close(self) -> None:
        for host in self.hosts:
            for daemon in host.daemons:
                daemon.terminate()
        self.panel.close()
        self.operator.close()
        self.exits.close()


def events_json(daemon: DaemonProcess) -> str:
    return "\n".join(json.dumps(e) for e in daemon.events)


def _add_to_config(path: Path, fields: dict[str, float]) -> None:
    """`agent enroll` has no flags for these; the file it wrote gets them, as an admin would."""
    document = tomllib.loads(path.read_text())
    document.pop("format_version", None)  # render_config writes its own
    write_config(path, render_config({**document, **fields}))
