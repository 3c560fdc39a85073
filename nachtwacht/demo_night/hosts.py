"""Real customer hosts for the demo, each in its own folder:

    hosts/<name>/state/      the daemon's state directory (agent.toml, state files, updater/)
    hosts/<name>/install/    the install root: versions/<v>/, current, previous
    hosts/<name>/run/        heartbeat.json of the managed agent, restart-requested
    hosts/<name>/daemon.log  the daemon's JSON event lines

The managed "agent service" (`current/bin/provibr-agent run`) is supervised by `ServiceSupervisor`,
the demo's stand-in for systemd's `Restart=always` unit: the agent's restart command is
`touch run/restart-requested`, and the supervisor restarts that host's service (from whatever
`current` names now) when the file appears, or when the service exits. The health command is a
small bash script (`HEALTH_SCRIPT`) that reads the heartbeat the *running* service writes — so
it proves which build really runs. It does what `provibr-agent health` does, without starting a
Python interpreter for every probe: on a fast clock the updater probes many times a real second.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import httpx

from agent_daemon.settings import render_config, write_config
from agent_daemon.updater import Updater, UpdateRequest, UpdaterSettings
from ground.clock import FakeClock
from nachtwacht.demo_night.errors import DemoFailed
from nachtwacht.demo_night.platform import (
    AgentAccount,
    nachtwacht_command,
    repository_environment,
)
from signed_release import load_public_keys

__all__ = [
    "RealHost",
    "ServiceSupervisor",
    "artifact_server",
    "preinstall",
    "write_health_script",
]

PLATFORM = "linux-x86_64"
CHANNEL = "stable"
STOP_DEADLINE_SECONDS = 60.0
# Product-second limits (they follow the fast clock). The daemon's config allows at most these.
MAX_REQUEST_TIMEOUT = 300.0
MAX_HEALTH_DEADLINE = 3600.0

# The heartbeat may be at most 5 s old. Builtins only: the updater probes many times a second.
HEALTH_SCRIPT = r"""#!/usr/bin/env bash
# nachtwacht demo: the managed agent is healthy when the heartbeat its running process writes is
# fresh and that process is alive. Prints the version the running process reported.
{ read -r beat < "$1" || [ -n "$beat" ]; } 2>/dev/null || {
    echo "unhealthy: no heartbeat at $1" >&2; exit 1; }
field() { local rest=${beat#*\"$1\": }; rest=${rest%%[,\}]*}; echo "${rest//\"/}"; }
version=$(field version) pid=$(field pid) written=$(field time)
kill -0 "$pid" 2>/dev/null || { echo "unhealthy: the writer of $1 is gone" >&2; exit 1; }
age=$(( EPOCHSECONDS - ${written%.*} ))
(( age <= 5 )) || { echo "unhealthy: the heartbeat is $age s old" >&2; exit 1; }
echo "$version"
"""


def write_health_script(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEALTH_SCRIPT)
    path.chmod(0o755)
    return path


@dataclass
class RealHost:
    account: AgentAccount
    org_name: str
    root: Path
    health_script: Path
    service: subprocess.Popen[bytes] | None = None
    stopping: subprocess.Popen[bytes] | None = None
    daemon: subprocess.Popen[bytes] | None = None

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def install_root(self) -> Path:
        return self.root / "install"

    @property
    def heartbeat(self) -> Path:
        return self.root / "run" / "heartbeat.json"

    @property
    def restart_request(self) -> Path:
        return self.root / "run" / "restart-requested"

    @property
    def daemon_log(self) -> Path:
        return self.root / "daemon.log"

    @property
    def restart_command(self) -> list[str]:
        return ["touch", str(self.restart_request)]

    @property
    def health_command(self) -> list[str]:
        return [str(self.health_script), str(self.heartbeat)]

    def prepare(self) -> None:
        for folder in (self.state_dir, self.install_root, self.heartbeat.parent):
            folder.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)

    def write_agent_config(self, *, control_url: str, public_key: Path, speed: float) -> None:
        """What `nachtwacht agent enroll` writes, for a fleet at once (enroll checks each
        credential against the control plane; the demo issued them a moment ago)."""
        fields: dict[str, str | float | list[str]] = {
            "control_url": control_url,
            "credential": self.account.agent_key,
            "agent_id": self.account.agent_id,
            "trusted_keys": [str(public_key)],
            "install_root": str(self.install_root),
            "platform": PLATFORM,
            "channel": CHANNEL,
            "restart_command": self.restart_command,
            "health_command": self.health_command,
            # Product seconds on a clock `speed` times as fast: keep a few real seconds of each.
            "health_deadline_seconds": min(MAX_HEALTH_DEADLINE, 30 * speed),
            "request_timeout_seconds": min(MAX_REQUEST_TIMEOUT, 5 * speed),
        }
        write_config(self.state_dir / "agent.toml", render_config(fields))

    def start_daemon(self, clock_setting: str) -> None:
        env = repository_environment({"NACHTWACHT_FAKE_CLOCK": clock_setting})
        with (
            self.daemon_log.open("ab") as log,
            (self.root / "daemon.stderr").open("ab") as errors,
        ):
            self.daemon = subprocess.Popen(
                nachtwacht_command("agent", "run", "--state-dir", str(self.state_dir)),
                env=env,
                stdout=log,
                stderr=errors,
                stdin=subprocess.DEVNULL,
            )

    def is_ready(self) -> bool:
        """The daemon has logged `daemon.ready` (its scheduler runs)."""
        try:
            return b'"event": "daemon.ready"' in self.daemon_log.read_bytes()
        except OSError:
            return False

    def stop_daemon(self) -> None:
        _stop(self.daemon)

    def installed_version(self) -> str | None:
        current = self.install_root / "current"
        return current.resolve().name if current.is_symlink() else None


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=STOP_DEADLINE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@dataclass
class ServiceSupervisor:
    """Keeps every host's managed agent running from `current`; restarts on request."""

    hosts: list[RealHost]
    poll_seconds: float = 0.05
    restarts: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="service-supervisor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                for host in self.hosts:
                    self._supervise(host)
            self._stop.wait(self.poll_seconds)

    def _supervise(self, host: RealHost) -> None:
        if host.restart_request.exists():
            host.restart_request.unlink(missing_ok=True)
            if host.service is not None and host.service.poll() is None:
                # Never wait here: one slow stop must not hold up the other hosts' services.
                host.service.terminate()
                host.stopping = host.service
            host.service = None
        if host.stopping is not None:
            if host.stopping.poll() is None:
                return
            host.stopping = None
        if host.service is not None and host.service.poll() is not None:
            host.service = None  # it exited: start it again, like Restart=always
        program = host.install_root / "current" / "bin" / "provibr-agent"
        if host.service is None and program.exists():
            host.service = subprocess.Popen(
                [str(program), "run", "--heartbeat", str(host.heartbeat)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
            )
            self.restarts += 1

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_DEADLINE_SECONDS)
        with self._lock:
            running = [p for h in self.hosts for p in (h.stopping, h.service) if p is not None]
            for process in running:
                if process.poll() is None:
                    process.terminate()
            for process in running:
                _stop(process)
            for host in self.hosts:
                host.service = host.stopping = None


class _ArtifactHandler(BaseHTTPRequestHandler):
    files: ClassVar[dict[str, bytes]] = {}

    def do_GET(self) -> None:
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        del format, args


@contextmanager
def artifact_server(files: dict[str, bytes]) -> Iterator[str]:
    """A loopback HTTP server for the builds installed before the night; yields its base URL."""
    handler = type("ArtifactHandler", (_ArtifactHandler,), {"files": dict(files)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def preinstall(
    host: RealHost,
    *,
    release_dir: Path,
    artifact_url: str,
    public_key: Path,
    before_night: datetime,
) -> None:
    """Install the first version with the real updater, as a host has it before the night."""
    settings = UpdaterSettings(
        install_root=host.install_root,
        state_dir=host.state_dir / "updater",
        trusted_keys=load_public_keys([public_key]),
        platform=PLATFORM,
        channel=CHANNEL,
        restart_command=tuple(host.restart_command),
        health_command=tuple(host.health_command),
        health_deadline_seconds=60,
        health_poll_seconds=0.1,
    )
    # At real speed, shortly before the night: the updater checks the manifest's dates.
    clock = FakeClock(start=before_night, anchor=time.time(), speed=1.0)
    with httpx.Client(timeout=30) as client:
        outcome = Updater(settings=settings, client=client, clock=clock).apply(
            UpdateRequest(
                run_id=f"demo-preinstall-{host.account.name}",
                manifest=(release_dir / "manifest.json").read_bytes(),
                signature=(release_dir / "manifest.sig").read_bytes(),
                artifact_url=artifact_url,
            )
        )
    if outcome.status != "succeeded":
        raise DemoFailed(
            f"installing the first version on {host.account.name} failed: {outcome.error}"
        )
