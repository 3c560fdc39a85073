"""The agent's parts that every `nachtwacht agent` verb makes from its settings, each made here
only: the names of the daemon's files in the state directory, the HTTP client, the (channel,
platform) it follows, and the updater, built on the first update.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

import httpx

from agent_daemon.connection.http_client import build_http_client
from agent_daemon.errors import ReleaseRefused
from agent_daemon.self_update.own_floor import OwnFloorStore
from agent_daemon.self_update.pending_switch import SwitchRun
from agent_daemon.settings import AgentSettings
from agent_daemon.updater.on_demand import UpdaterOnDemand
from agent_daemon.updater.release_keys import trusted_release_keys
from agent_daemon.updater.update_records import (
    OnProgress,
    SwitchUnderWay,
    UpdateOutcome,
    UpdateRequest,
)
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.clock import Clock
from ground.contract import ReleaseTrack

if TYPE_CHECKING:
    from agent_daemon.self_update.seam import SelfInstall, SelfUpdater
    from agent_daemon.updater.updater import Updater

__all__ = [
    "CONFIG_CACHE_NAME",
    "OUTBOX_DIR_NAME",
    "STATE_FILE_NAME",
    "SelfUpdaterOnDemand",
    "build_self_updater",
    "build_updater",
    "http_client_for",
    "track_of",
]

STATE_FILE_NAME = "daemon-state.json"
CONFIG_CACHE_NAME = "config-cache.json"
OUTBOX_DIR_NAME = "outbox"


def track_of(settings: AgentSettings) -> ReleaseTrack:
    """The (channel, platform) this agent follows, as the config poll and the claim name it."""
    return ReleaseTrack(channel=settings.updater.channel, platform=settings.updater.platform)


def build_updater(
    settings: AgentSettings,
    *,
    http: httpx.Client,
    clock: Clock,
    on_progress: OnProgress | None = None,
) -> UpdaterOnDemand:
    def build() -> Updater:
        # Imported on the first update: an idle daemon does not hold the update code.
        from agent_daemon.updater.updater import Updater

        return Updater(settings=settings.updater, client=http, clock=clock, on_progress=on_progress)

    return UpdaterOnDemand(settings=settings.updater, build=build)


def build_self_updater(
    settings: AgentSettings,
    *,
    http: httpx.Client,
    clock: Clock,
    running: str | None,
    install: SelfInstall,
) -> SelfUpdaterOnDemand:
    """The updater of nachtwacht's own agent, for a host that can install its builds."""

    def build() -> SelfUpdater:
        # Imported on the first self-update: an idle daemon does not hold the verification code.
        from agent_daemon.self_update.seam import SelfUpdater

        return SelfUpdater(
            settings=settings.updater, client=http, clock=clock, running=running, install=install
        )

    return SelfUpdaterOnDemand(
        running=running, install=install, build=build, settings=settings.updater
    )


class SelfUpdaterOnDemand:
    """What the daemon needs of a `SelfUpdater`; `build` makes the real one on first use (the
    version it runs is known without it)."""

    def __init__(
        self,
        *,
        running: str | None,
        install: SelfInstall,
        build: Callable[[], SelfUpdater],
        settings: UpdaterSettings,
    ) -> None:
        self._settings = settings
        self._floors = OwnFloorStore(settings.state_dir)
        self._running = running
        self._install = install
        self._build = build
        self._built: SelfUpdater | None = None

    def running_version(self) -> str | None:
        return self._running

    def apply(self, request: UpdateRequest) -> UpdateOutcome | SwitchUnderWay:
        if self._built is None:
            self._built = self._build()
        return self._built.apply(request)

    def restart(self) -> None:
        self._install.restart()

    def accepted_floor(self, now: datetime) -> int | None:
        """The updater line's floor under the release keys trusted at `now`, or None."""
        try:
            trusted = trusted_release_keys(self._settings, now)
        except ReleaseRefused:
            return None
        return self._floors.load().floor_for(trusted)

    def accept(self, run: SwitchRun) -> None:
        """The switch of `run` committed: its manifest is the updater line's floor now."""
        if run.manifest_version is not None and run.signer is not None:
            self._floors.accept(run.manifest_version, run.signer)


def http_client_for(
    settings: AgentSettings,
    clock: Clock,
    *,
    transport: httpx.BaseTransport | None = None,
    environ: Mapping[str, str] | None = None,
) -> httpx.Client:
    """`environ` (default: this process's) supplies the proxy variables `settings` do not
    override."""
    return build_http_client(
        base_url=settings.control_url,
        credential=settings.credential,
        timeout_seconds=clock.real_seconds(settings.request_timeout_seconds),
        transport=transport,
        network=settings.network,
        environ=environ,
    )
