"""The demo's control plane: an embedded PostgreSQL in the demo's folder, the accounts and
releases made through the control plane's own service layer, and `nachtwacht control serve` as a
real process on the night's fast clock.

The demo process attaches to the embedded PostgreSQL too (to enroll the fleet in one transaction
per organisation, and to watch the night); `serve` shares it, and the server stops when the last
of them lets go — so `--keep` leaves it running with `serve` alone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from control_plane import migrate
from control_plane.accounts.services import AccountService
from control_plane.database import EmbeddedPostgres, open_pool
from control_plane.errors import ControlPlaneError
from control_plane.ready_line import wait_for_ready_url
from control_plane.types import Pool
from ground.clock import Clock
from nachtwacht.demo_night.errors import DemoFailed

__all__ = [
    "AgentAccount",
    "ControlPlane",
    "OrgAccount",
    "nachtwacht_command",
    "repository_environment",
]

# A deadline for a failure to start, not a speed expectation: a healthy start takes seconds.
START_DEADLINE_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 60.0


def nachtwacht_command(*args: str) -> list[str]:
    """The `nachtwacht` command as a child process of this same interpreter and checkout."""
    return [sys.executable, "-m", "nachtwacht.cli", *args]


def repository_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a child: this checkout importable, no inherited nachtwacht settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NACHTWACHT_")}
    for name in ("STATE_DIRECTORY", "NOTIFY_SOCKET", "CONFIGURATION_DIRECTORY"):
        env.pop(name, None)
    checkout = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in [checkout, os.environ.get("PYTHONPATH")] if p)
    env.update(extra or {})
    return env


@dataclass(frozen=True, kw_only=True)
class AgentAccount:
    agent_id: str
    name: str
    agent_key: str


@dataclass(frozen=True, kw_only=True)
class OrgAccount:
    org_id: str
    name: str
    panel_key: str
    agents: tuple[AgentAccount, ...]


@dataclass
class ControlPlane:
    """The embedded database (held by this process), and `control serve` once started."""

    data_dir: Path
    log_path: Path
    url: str = ""
    database_url: str = ""
    process: subprocess.Popen[str] | None = None
    _embedded: EmbeddedPostgres | None = None
    _pool: Pool | None = None
    _stopped: bool = field(default=False)

    # -- the database ---------------------------------------------------------------------------

    def start_database(self) -> None:
        try:
            self._embedded = EmbeddedPostgres(self.data_dir)
            self.database_url = self._embedded.start()
            migrate.upgrade(self.database_url)
            self._pool = open_pool(self.database_url, min_size=1, max_size=2)
        except ControlPlaneError as exc:
            raise DemoFailed(f"the embedded PostgreSQL did not start: {exc}") from exc

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise DemoFailed("the database is not open")
        return self._pool

    def enroll_fleet(
        self, sizes: tuple[int, ...], names: tuple[str, ...], clock: Clock
    ) -> list[OrgAccount]:
        """Organisations and their agents, through the control plane's own service layer."""
        accounts = AccountService(self.pool)
        orgs = []
        for index, size in enumerate(sizes):
            org = accounts.create_org(names[index], now=clock.now())
            prefix = org.name.split()[0].lower()
            agents = tuple(
                AgentAccount(
                    agent_id=str(issued.agent_id), name=issued.name, agent_key=issued.agent_key
                )
                for issued in (
                    accounts.enroll_agent(org.org_id, f"{prefix}-{number:03d}", now=clock.now())
                    for number in range(1, size + 1)
                )
            )
            orgs.append(
                OrgAccount(
                    org_id=str(org.org_id), name=org.name, panel_key=org.panel_key, agents=agents
                )
            )
        return orgs

    def create_operator_key(self, clock: Clock) -> str:
        del clock  # issuing a key stamps nothing
        return AccountService(self.pool).create_operator_key("nachtwacht demo")

    # -- the server -----------------------------------------------------------------------------

    def serve(self, *, clock_setting: str, public_key: Path) -> str:
        """Start `nachtwacht control serve` on the fast clock; returns its URL when it is ready."""
        env = repository_environment(
            {
                "NACHTWACHT_FAKE_CLOCK": clock_setting,
                "NACHTWACHT_RELEASE_PUBLIC_KEYS": str(public_key),
            }
        )
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                nachtwacht_command(
                    "control",
                    "serve",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--data-dir",
                    str(self.data_dir),
                    "--pool-size",
                    "8",
                ),
                env=env,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        self.url = self._wait_until_ready(self.process)
        return self.url

    def _wait_until_ready(self, process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        url = wait_for_ready_url(process.stdout, timeout_seconds=START_DEADLINE_SECONDS)
        if url is None:
            self._terminate()
            tail = self.log_path.read_text(errors="replace").strip().splitlines()[-1:]
            raise DemoFailed(
                "the control plane did not start"
                + (f": {tail[0]}" if tail else "")
                + f" (log: {self.log_path})"
            )
        return url

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def _terminate(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()

    def close(self, *, keep_serving: bool) -> None:
        """Let go of everything; with `keep_serving`, `serve` (and so the database) stays up."""
        if self._stopped:
            return
        self._stopped = True
        if not keep_serving:
            self._terminate()
        elif self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._embedded is not None:
            self._embedded.stop()
            self._embedded = None
