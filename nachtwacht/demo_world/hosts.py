"""One customer host in a folder, as the demo and the end-to-end tests build it:

    <root>/state/              the daemon's state directory (agent.toml, state files, updater/)
    <root>/install/            the install root: versions/<v>/, current, previous
    <root>/run/heartbeat.json  written by the running managed agent
    <root>/run/restart-requested   the restart command touches it; `ServiceSupervisor` restarts
    <root>/daemon.log          the daemon's JSON event lines (when started with `start_logged`)

The health command proves which build really runs: `provibr-agent health` reads the heartbeat the
*running* service writes. `HEALTH_SCRIPT` does the same in bash builtins, for a fast clock on which
the updater probes many times a real second (a Python start per probe would not keep up).
`preinstall` puts a first version in place with the real updater, as a host has it before a night.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_daemon.settings import render_config, write_config
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater import Updater
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.clock import FAKE_CLOCK_ENV
from nachtwacht.demo_world.children import SUBPROCESSES, Launcher
from nachtwacht.demo_world.clocks import showing_now
from nachtwacht.demo_world.daemons import launch_daemon, run_agent
from nachtwacht.demo_world.errors import WorldError
from nachtwacht.demo_world.release_tooling import CHANNEL, PLATFORM
from signed_release.keys import generate_key_files

__all__ = ["HEALTH_SCRIPT", "AgentHost", "preinstall", "write_health_script"]

# Product-second limits (they follow the fast clock). The daemon's config allows at most these.
MAX_REQUEST_TIMEOUT = 300.0
MAX_HEALTH_DEADLINE = 3600.0
MAX_DOWNLOAD_READ_TIMEOUT = 600.0
MAX_DOWNLOAD_DEADLINE = 86400.0

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
class AgentHost:
    """A host's folders, its managed agent's commands, and its `nachtwacht agent` commands.

    `keys_dir` holds the trusted `release.pub` (default: a new key pair under `root/keys`);
    `health_script` replaces `provibr-agent health` as the health command (see module doc);
    `launcher` runs its one-shot `nachtwacht agent` commands.
    """

    root: Path
    keys_dir: Path | None = None
    health_script: Path | None = None
    launcher: Launcher = SUBPROCESSES

    def __post_init__(self) -> None:
        if self.keys_dir is None:
            self.keys_dir = self.root / "keys"
        if not (self.keys_dir / "release.pub").exists():
            generate_key_files(self.keys_dir)

    @property
    def public_key(self) -> Path:
        assert self.keys_dir is not None
        return self.keys_dir / "release.pub"

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
        if self.health_script is not None:
            return [str(self.health_script), str(self.heartbeat)]
        return [str(self.install_root / "current/bin/provibr-agent"), "health",
                "--heartbeat", str(self.heartbeat)]  # fmt: skip

    def prepare(self) -> None:
        for folder in (self.state_dir, self.install_root, self.heartbeat.parent):
            folder.mkdir(parents=True, exist_ok=True)
        self.state_dir.chmod(0o700)

    # -- `nachtwacht agent …` -------------------------------------------------------------------

    def enroll(
        self, url: str, credential: str, *extra: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`agent enroll` (it checks the credential against the control plane); `extra` flags
        come last, so they override the defaults given here."""
        return run_agent(
            "enroll", "--state-dir", str(self.state_dir), "--url", url,
            "--credential", credential, "--trusted-key", str(self.public_key),
            "--install-root", str(self.install_root), "--restart-command", "true", *extra,
            env=env, launcher=self.launcher,
        )  # fmt: skip

    def write_agent_config(
        self, *, control_url: str, credential: str, agent_id: str, speed: float
    ) -> None:
        """What `nachtwacht agent enroll` writes, for a fleet at once (enroll checks each
        credential against the control plane; the world issued them a moment ago)."""
        fields: dict[str, str | float | list[str]] = {
            "control_url": control_url,
            "credential": credential,
            "agent_id": agent_id,
            "trusted_keys": [str(self.public_key)],
            "install_root": str(self.install_root),
            "platform": PLATFORM,
            "channel": CHANNEL,
            "restart_command": self.restart_command,
            "health_command": self.health_command,
            # Product seconds on a clock `speed` times as fast: keep a few real seconds of each.
            "health_deadline_seconds": min(MAX_HEALTH_DEADLINE, 30 * speed),
            "request_timeout_seconds": min(MAX_REQUEST_TIMEOUT, 5 * speed),
            # The download's defaults (30 s without data, 900 s in all) were left to shrink with
            # the clock: 1 real second at 30x, a quarter at 120x. On a loaded machine (the suite
            # in parallel) a server that paused that long failed the night as a stalled
            # download. Stalls are a property of the network, measured in real seconds.
            "download_read_timeout_seconds": min(MAX_DOWNLOAD_READ_TIMEOUT, 5 * speed),
            "download_deadline_seconds": min(MAX_DOWNLOAD_DEADLINE, 60 * speed),
        }
        write_config(self.state_dir / "agent.toml", render_config(fields))

    def status(
        self, *extra: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_agent(
            "status", "--state-dir", str(self.state_dir), *extra, env=env, launcher=self.launcher
        )

    def start_logged(self, clock_setting: str) -> subprocess.Popen[bytes]:
        """`agent run` with its events appended to `daemon.log` (for a fleet nobody waits on)."""
        with self.daemon_log.open("ab") as log, (self.root / "daemon.stderr").open("ab") as errors:
            return launch_daemon(
                self.state_dir,
                env={FAKE_CLOCK_ENV: clock_setting},
                stdout=log,
                stderr=errors,
            )

    def is_ready(self) -> bool:
        """The daemon has logged `daemon.ready` to `daemon.log` (its scheduler runs)."""
        try:
            return b'"event": "daemon.ready"' in self.daemon_log.read_bytes()
        except OSError:
            return False

    # -- what is installed and what runs --------------------------------------------------------

    def current_version(self) -> str | None:
        link = self.install_root / "current"
        return Path(link.readlink()).name if link.is_symlink() else None

    def installed_versions(self) -> list[str]:
        versions = self.install_root / "versions"
        return sorted(p.name for p in versions.iterdir() if not p.name.startswith("."))

    def running_version(self) -> str | None:
        """The version the running managed agent reports, or None when it is not healthy."""
        result = subprocess.run(self.health_command, capture_output=True, text=True, check=False)
        return result.stdout.strip() if result.returncode == 0 else None

    def updater_settings(
        self,
        trusted_keys: Mapping[str, Ed25519PublicKey],
        *,
        health_deadline_seconds: float = 60.0,
        health_poll_seconds: float = 0.2,
    ) -> UpdaterSettings:
        """The updater as this host's daemon runs it (its state in `state/updater`)."""
        return UpdaterSettings(
            install_root=self.install_root,
            state_dir=self.state_dir / "updater",
            trusted_keys=trusted_keys,
            platform=PLATFORM,
            channel=CHANNEL,
            restart_command=tuple(self.restart_command),
            health_command=tuple(self.health_command),
            health_deadline_seconds=health_deadline_seconds,
            health_poll_seconds=health_poll_seconds,
        )


def preinstall(
    host: AgentHost,
    *,
    manifest: bytes,
    signature: bytes,
    artifact_url: str,
    trusted_keys: Mapping[str, Ed25519PublicKey],
    before_night: datetime,
    health_poll_seconds: float = 0.2,
) -> UpdateOutcome:
    """Install the first version with the real updater, as a host has it before the night: at
    real speed, shortly before the night (the updater checks the manifest's dates)."""
    settings = host.updater_settings(trusted_keys, health_poll_seconds=health_poll_seconds)
    with httpx.Client(timeout=30) as client:
        outcome = Updater(settings=settings, client=client, clock=showing_now(before_night)).apply(
            UpdateRequest(
                run_id=f"preinstall-{host.root.name}",
                manifest=manifest,
                signature=signature,
                artifact_url=artifact_url,
            )
        )
    if outcome.status != "succeeded":
        raise WorldError(
            f"installing the first version on {host.root.name} failed: {outcome.error}"
        )
    return outcome
