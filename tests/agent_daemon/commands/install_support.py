"""What the `install` / `uninstall` / `diagnose` tests share: a recording `systemctl` first on
PATH (a unit seam: the real one would start services on the machine running the tests), a unit
directory of the test's own, and the commands run as real processes."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost


@dataclass
class FakeSystemd:
    root: Path
    exit_status: int = 0

    def __post_init__(self) -> None:
        self.bin.mkdir(parents=True, exist_ok=True)
        self.unit_dir.mkdir(parents=True, exist_ok=True)
        script = self.bin / "systemctl"
        script.write_text(
            f'#!/bin/sh\necho "$*" >> {self.log}\n'
            f'[ -f {self.root / "fail"} ] && {{ echo "Failed: Access denied" >&2; exit 1; }}\n'
            "exit 0\n"
        )
        script.chmod(0o755)

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def unit_dir(self) -> Path:
        return self.root / "system"

    @property
    def log(self) -> Path:
        return self.root / "systemctl.log"

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def fail_from_now(self) -> None:
        (self.root / "fail").touch()

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}", **extra}


def install(
    host: AgentHost,
    systemd: FakeSystemd,
    url: str,
    token: str,
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`agent install` into the host's folders; `extra` flags come last and override."""
    return run_agent(
        "install", "--state-dir", str(host.state_dir), "--url", url,
        "--enrollment-token", token, "--name", "web-01", "--trusted-key", str(host.public_key),
        "--install-root", str(host.install_root), "--restart-command", "true",
        "--systemd-dir", str(systemd.unit_dir), *extra,
        env=systemd.env(**(env or {})),
    )  # fmt: skip


def uninstall(
    host: AgentHost, systemd: FakeSystemd, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_agent(
        "uninstall", "--state-dir", str(host.state_dir), "--systemd-dir", str(systemd.unit_dir),
        *extra, env=systemd.env(),
    )  # fmt: skip
