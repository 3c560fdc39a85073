"""The demo's control plane: an embedded PostgreSQL in the demo's folder, the accounts and
releases made through the control plane's own service layer, and `nachtwacht control serve` as a
real process on the night's fast clock.

The demo process attaches to the embedded PostgreSQL too (to enroll the fleet in one transaction
per organisation, and to watch the night); `serve` shares it, and the server stops when the last
of them lets go — so `--keep` leaves it running with `serve` alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from control_plane.accounts.services import AccountService
from control_plane.database import open_pool
from control_plane.types import Pool
from ground.clock import Clock
from nachtwacht.demo_night.errors import DemoFailed
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase

__all__ = ["AgentAccount", "ControlPlane", "OrgAccount"]


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
    server: RunningControlPlane | None = None
    _database: EmbeddedDatabase | None = None
    _pool: Pool | None = None
    _stopped: bool = field(default=False)

    # -- the database ---------------------------------------------------------------------------

    def start_database(self) -> None:
        self._database = EmbeddedDatabase(self.data_dir)
        self._pool = open_pool(self._database.start(), min_size=1, max_size=2)

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
        self.server = start_control_plane(
            stderr_path=self.log_path,
            data_dir=self.data_dir,
            fake_clock=clock_setting,
            env={"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(public_key)},
            args=["--pool-size", "8"],
        )
        return self.server.base_url

    @property
    def pid(self) -> int | None:
        return None if self.server is None else self.server.pid

    def close(self, *, keep_serving: bool) -> None:
        """Let go of everything; with `keep_serving`, `serve` (and so the database) stays up."""
        if self._stopped:
            return
        self._stopped = True
        if self.server is not None:
            if keep_serving:
                self.server.detach()
            else:
                self.server.stop()
        if self._pool is not None:
            self._pool.close()
            self._pool = None
        if self._database is not None:
            self._database.stop()
            self._database = None
