"""The control plane's services: each takes its pool and clock in the constructor and holds the SQL.

Routes call services and never build them; `build_services` builds them once at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from control_plane.services.accounts import AccountService, IssuedAgent, IssuedOrg, Principal
from control_plane.services.agent_config import AgentConfigService
from control_plane.services.agents import AgentService
from control_plane.services.brake import BrakeService
from control_plane.services.claims import ClaimService
from control_plane.services.releases import ReleaseService
from control_plane.services.runs import RunService
from control_plane.services.settings import PlatformSettings, SettingsService
from control_plane.types import Pool
from ground.clock import Clock

if TYPE_CHECKING:
    from collections.abc import Mapping

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from control_plane.reconcile.services import ReconcileServices

__all__ = [
    "AccountService",
    "AgentConfigService",
    "AgentService",
    "BrakeService",
    "ClaimService",
    "IssuedAgent",
    "IssuedOrg",
    "PlatformSettings",
    "Principal",
    "ReleaseService",
    "RunService",
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
    claims: ClaimService
    runs: RunService
    releases: ReleaseService
    brake: BrakeService
    reconcile: ReconcileServices


def build_services(
    pool: Pool, clock: Clock, trusted_keys: Mapping[str, Ed25519PublicKey] | None = None
) -> Services:
    """Every service, built once; `trusted_keys` are the release keys publishing checks against."""
    # Imported here: the reconcile package reads the settings through this package.
    from control_plane.reconcile.services import build_reconcile_services

    return Services(
        accounts=AccountService(pool, clock),
        agents=AgentService(pool, clock),
        agent_config=AgentConfigService(pool, clock),
        settings=SettingsService(pool),
        claims=ClaimService(pool, clock),
        runs=RunService(pool, clock),
        releases=ReleaseService(pool, clock, trusted_keys or {}),
        brake=BrakeService(pool, clock),
        reconcile=build_reconcile_services(pool, clock),
    )
