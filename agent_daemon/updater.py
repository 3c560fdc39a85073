"""The updater of the managed agent: one update on a customer host, from a claimed release to the
agent running the new build (or the old one again).

Interim: the interface the daemon builds against; the implementation follows in the next commit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from nachtwacht.clock import Clock

__all__ = ["UpdateOutcome", "UpdateRequest", "Updater", "UpdaterSettings"]


@dataclass(frozen=True, kw_only=True)
class UpdaterSettings:
    install_root: Path
    state_dir: Path
    trusted_keys: Mapping[str, Ed25519PublicKey]
    platform: str
    channel: str
    restart_command: tuple[str, ...] = ("systemctl", "restart", "provibr-agent.service")
    health_command: tuple[str, ...] = ()
    health_deadline_seconds: float = 120.0
    disk_reserve_bytes: int = 50 * 1024 * 1024
    download_read_timeout_seconds: float = 30.0
    download_deadline_seconds: float = 900.0


@dataclass(frozen=True, kw_only=True)
class UpdateRequest:
    run_id: str
    manifest: bytes
    signature: bytes
    artifact_url: str


@dataclass(frozen=True, kw_only=True)
class UpdateOutcome:
    status: Literal["succeeded", "failed", "rolled_back"]
    version: str | None
    error: str | None
    run_id: str


class Updater:
    def __init__(self, *, settings: UpdaterSettings, client: httpx.Client, clock: Clock) -> None:
        self._settings = settings
        self._client = client
        self._clock = clock

    def apply(self, request: UpdateRequest) -> UpdateOutcome:
        raise NotImplementedError("interim interface; implementation in progress")

    def resume(self) -> UpdateOutcome | None:
        raise NotImplementedError("interim interface; implementation in progress")

    def installed_version(self) -> str | None:
        raise NotImplementedError("interim interface; implementation in progress")
