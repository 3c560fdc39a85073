"""One night for a small fleet, end to end: a real control plane process on the embedded
PostgreSQL, real `nachtwacht agent run` processes, real signed builds made with
`nachtwacht release`, real install roots with the managed agent under a supervisor process — all on
one fast fake clock.

Time: every process gets the same `NACHTWACHT_FAKE_CLOCK` (start, anchor, speed). The anchor lies a
little in the real future so that setting up (starting processes, enrolling) happens while the
clock still shows the evening; tests then wait for *product* instants, never for real durations.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx

from agent_daemon.updater import Updater, UpdateRequest, UpdaterSettings
from ground.clock import FakeClock
from signed_release import generate_key_files, load_private_key
from tests.agent_daemon.daemon_support.agent_host import (
    AgentHost,
    DaemonProcess,
    agent_environment,
)
from tests.agent_daemon.updater_support.artifact_server import artifact_server
from tests.agent_daemon.updater_support.releases import ReleaseFactory

REPO_ROOT = Path(__file__).resolve().parents[3]
SUPERVISOR = REPO_ROOT / "tests/agent_daemon/updater_support/supervisor.py"
AMSTERDAM = ZoneInfo("Europe/Amsterdam")
SPEED = 30.0
# Product seconds: generous, because a product minute is two real seconds on a shared machine.
HEALTH_DEADLINE_SECONDS = "1800"
REQUEST_TIMEOUT_SECONDS = "300"


def local(text: str) -> datetime:
    """`2026-11-30T02:50` in Europe/Amsterdam as an aware UTC instant (fold=0: the first)."""
    return datetime.fromisoformat(text).replace(tzinfo=AMSTERDAM).astimezone(UTC)


@dataclass(frozen=True)
class NightClock:
    start: datetime
    anchor: float
    speed: float = SPEED

    @classmethod
    def starting(
        cls, start: datetime, *, speed: float = SPEED, lead_seconds: float = 25.0
    ) -> NightClock:
        return cls(start=start, anchor=time.time() + lead_seconds, speed=speed)

    @property
    def setting(self) -> str:
        return FakeClock(start=self.start, anchor=self.anchor, speed=self.speed).setting()

    def now(self) -> datetime:
        return self.start + timedelta(seconds=(time.time() - self.anchor) * self.speed)

    def wait_until(self, instant: datetime) -> None:
        remaining = (instant - self.now()).total_seconds() / self.speed
        if remaining > 0:
            time.sleep(remaining)

    def fake(self) -> FakeClock:
        return FakeClock(start=self.start, anchor=self.anchor, speed=self.speed)


def run_cli(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "nachtwacht.cli", *args],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        raise AssertionError(f"nachtwacht {args}: exit {result.returncode}: {result.stderr}")
    return result.stdout


@dataclass
class Host:
    """One customer host: its agent in the control plane, install root, supervisor and daemon."""

    name: str
    agent_id: str
    agent: AgentHost
    supervisor: subprocess.Popen[bytes]
    heartbeat: Path
    clock_setting: str
    daemons: list[DaemonProcess] = field(default_factory=list)

    @property
    def daemon(self) -> DaemonProcess:
        return self.daemons[-1]

    def start(self, *, clock_setting: str | None = None) -> DaemonProcess:
        self.daemons.append(self.agent.start(fake_clock=clock_setting or self.clock_setting))
        return self.daemon

    def current_version(self) -> str | None:
        link = self.agent.install_root / "current"
        return Path(link.readlink()).name if link.is_symlink() else None

    def installed_versions(self) -> list[str]:
        versions = self.agent.install_root / "versions"
        return sorted(p.name for p in versions.iterdir() if not p.name.startswith("."))

    def running_version(self) -> str | None:
        result = subprocess.run(
            [str(self.agent.install_root / "current/bin/provibr-agent"), "health",
             "--heartbeat", str(self.heartbeat)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        return result.stdout.strip() if result.returncode == 0 else None


@dataclass
class Night:
    """The control plane, the release key and builds, and the hosts of one test."""

    root: Path
    clock: NightClock
    start_control_plane: Callable[..., Any]
    control_plane_args: tuple[str, ...] = ()
    exits: ExitStack = field(default_factory=ExitStack)
    hosts: list[Host] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True)
        self.keys_dir = self.root / "release-keys"
        generate_key_files(self.keys_dir)
        self.public_key = self.keys_dir / "release.pub"
        self.env = {"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(self.public_key)}
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
        self.factory.workdir.mkdir()

    # -- the control plane --------------------------------------------------------------------

    def restart_control_plane(self) -> None:
        self.plane = self.start_control_plane(
            fake_clock=self.clock.setting,
            env=self.env,
            args=list(self.control_plane_args),
        )

    def publish(self, version: str, manifest_version: int) -> None:
        """Build, sign and publish with the real release tooling and the control plane's CLI."""
        env = agent_environment(NACHTWACHT_FAKE_CLOCK=self.clock.setting)
        build = self.root / f"provibr-agent-{version}.tar.gz"
        out = self.root / f"release-{version}"
        run_cli("release", "build-demo-agent", "--version", version, "--out", str(build), env=env)
        run_cli(
            "release", "sign", "--key", str(self.keys_dir / "release.key"), "--version", version,
            "--channel", "stable", "--platform", "linux-x86_64", "--expires-in", "30d",
            "--manifest-version", str(manifest_version), "--out", str(out), str(build),
            env=env,
        )  # fmt: skip
        self.plane.admin(
            "publish-release", str(out / "manifest.json"), str(out / "manifest.sig"), str(build)
        )

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

    def add_host(self, name: str, *, installed: tuple[str, int] | None = ("1.4.1", 41)) -> Host:
        enrolled = self.plane.enroll_agent(self.org_id, name)
        base = self.root / name
        agent = AgentHost(base, keys_dir=self.keys_dir)
        agent.install_root.mkdir(parents=True)
        heartbeat = base / "run" / "heartbeat.json"
        heartbeat.parent.mkdir(parents=True)
        pidfile = base / "supervisor.pid"
        supervisor = subprocess.Popen(
            [sys.executable, str(SUPERVISOR), str(agent.install_root), str(heartbeat), str(pidfile)]
        )
        self.exits.callback(_stop, supervisor)
        while not pidfile.exists() or not pidfile.read_text().strip():
            time.sleep(0.05)
        health = [str(agent.install_root / "current/bin/provibr-agent"), "health",
                  "--heartbeat", str(heartbeat)]  # fmt: skip
        if installed is not None:
            self._preinstall(agent, supervisor.pid, health, *installed)
        result = agent.enroll(
            self.plane.base_url,
            enrolled["agent_key"],
            "--restart-command", f"kill -HUP {supervisor.pid}",
            "--health-command", " ".join(health),
            "--health-deadline-seconds", HEALTH_DEADLINE_SECONDS,
            "--request-timeout-seconds", REQUEST_TIMEOUT_SECONDS,
            env=agent_environment(NACHTWACHT_FAKE_CLOCK=self.clock.setting),
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        host = Host(
            name=name,
            agent_id=enrolled["agent_id"],
            agent=agent,
            supervisor=supervisor,
            heartbeat=heartbeat,
            clock_setting=self.clock.setting,
        )
        self.hosts.append(host)
        return host

    def _preinstall(
        self, agent: AgentHost, supervisor_pid: int, health: list[str], version: str, mv: int
    ) -> None:
        """The version the host runs before the night, installed by the updater itself."""
        release = self.factory.release(version, mv)
        with artifact_server() as server, httpx.Client() as client:
            url = server.serve("/preinstall", release.artifact)
            updater = Updater(
                settings=UpdaterSettings(
                    install_root=agent.install_root,
                    state_dir=agent.state_dir / "updater",
                    trusted_keys=self.factory.trusted,
                    platform="linux-x86_64",
                    channel="stable",
                    restart_command=("kill", "-HUP", str(supervisor_pid)),
                    health_command=tuple(health),
                    health_deadline_seconds=60,
                    health_poll_seconds=0.2,
                ),
                client=client,
                # Before the night, at real speed: the pre-install is not part of the test.
                clock=FakeClock(start=self.clock.start, anchor=time.time(), speed=1.0),
            )
            outcome = updater.apply(
                UpdateRequest(
                    run_id="preinstall",
                    manifest=release.manifest_bytes,
                    signature=release.signature,
                    artifact_url=url,
                )
            )
        assert outcome.status == "succeeded", outcome.error

    def close(self) -> None:
        for host in self.hosts:
            for daemon in host.daemons:
                daemon.terminate()
        self.panel.close()
        self.operator.close()
        self.exits.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def events_json(daemon: DaemonProcess) -> str:
    return "\n".join(json.dumps(e) for e in daemon.events)
