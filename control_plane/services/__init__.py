"""The control plane's services: each takes its pool and clock in the constructor and holds the SQL.

Routes call services and never build them; `build_services` builds them once at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from control_plane.services.accounts import AccountService, IssuedAgent, IssuedOrg, Principal
from control_plane.services.agent_config import AgentConfigService
from control_plane.services.agents import AgentService
from control_plane.services.settings import PlatformSettings, SettingsService
from control_plane.types import Pool
from nachtwacht.clock import Clock

__all__ = [
    "AccountService",
    "AgentConfigService",
    "AgentService",
    "IssuedAgent",
    "IssuedOrg",
    "PlatformSettings",
    "Principal",
    "Services",
    "SettingsService",
    "build_services",
]


@dataclass(frozen=True, kw_only=True)
class Services:
    accounts: AccountService
    agents: AgentService
    agent_config: AgentConfigService
    settings: SettingsService


def build_services(pool: Pool, clock: Clock) -> Services:
    return Services(
        accounts=AccountService(pool, clock),
        agents=AgentService(pool, clock),
        agent_config=AgentConfigService(pool, clock),
        settings=SettingsService(pool),
    )
