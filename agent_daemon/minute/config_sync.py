"""Step 1 of the minute, the reach: the agent's config from the control plane, and what it teaches.

`ConfigSync` asks for the config with the cached ETag (a 304 confirms the cached one), keeps the
answer on disk for offline minutes and `status`, logs when the schedule, the release or the brake
changed, and says loudly when the host's clock and the control plane's disagree beyond the bound
the `ServerClock` keeps its offset within. A reach that fails is one of `decide`'s answers
(`Unreachable`, `CredentialRejected`, `ConfigRejected`), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent_daemon.connection import wire
from agent_daemon.connection.config_cache import CachedConfig, ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient, NotModified
from agent_daemon.connection.server_clock import MAX_SERVER_CLOCK_OFFSET, ServerClock
from agent_daemon.errors import (
    BadServerAnswer,
    ControlPlaneUnreachable,
    CredentialRefused,
    DaemonStateError,
)
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.daemon_lines import error_fields
from agent_daemon.minute.decision import ConfigRejected, CredentialRejected, Unreachable
from ground.contract import AgentConfig

__all__ = ["CLOCK_WARNING_INTERVAL", "ConfigSync", "Reached"]

# While host and server disagree beyond the offset bound, the warning is repeated this often.
CLOCK_WARNING_INTERVAL = timedelta(hours=1)


@dataclass(frozen=True, kw_only=True)
class Reached:
    """What the reach brought: a fresh config, or the cached one confirmed by a 304."""

    config: AgentConfig
    raw: dict[str, Any]
    etag: str | None


class ConfigSync:
    def __init__(
        self,
        *,
        control: ControlPlaneClient,
        config_cache: ConfigCache,
        server_clock: ServerClock,
        log: EventLog,
    ) -> None:
        self._control = control
        self._cache = config_cache
        self._clock = server_clock
        self._log = log
        self._cached: CachedConfig | None = None
        self._synced_once = False
        self._clock_warned_at: datetime | None = None

    @property
    def cached_config(self) -> AgentConfig | None:
        """The config the last reach brought (or the cache held at start): what a minute that
        cannot reach the control plane knows of the schedule."""
        return None if self._cached is None else self._cached.config

    def load_cached(self) -> None:
        """At start: the config cached by the last run, and the clock offset it was synced at.
        An unusable cache is one log line; the first reach replaces it."""
        try:
            self._cached = self._cache.load()
            if self._cached is not None:
                self._clock.learn_offset_seconds(self._cached.offset_seconds)
        except DaemonStateError as exc:
            self._log.emit("config_cache.unusable", level="warning", error=str(exc))

    def reach(
        self, *, trust_root_version: int | None = None
    ) -> Reached | Unreachable | CredentialRejected | ConfigRejected:
        """The config, fresh or confirmed unchanged (304), or why there is none. The poll tells
        the control plane the trust root held (`trust_root_version`, None: none)."""
        cached = self._cached
        try:
            answer = self._control.fetch_config(
                etag=None if cached is None else cached.etag,
                trust_root_version=trust_root_version,
            )
        except ControlPlaneUnreachable as exc:
            return Unreachable(error=str(exc), platform=exc.status is not None)
        except CredentialRefused as exc:
            return CredentialRejected(error=str(exc))
        except BadServerAnswer as exc:
            return ConfigRejected(error=str(exc))
        if isinstance(answer, NotModified):
            if cached is None:
                return ConfigRejected(
                    error=f"{wire.CONFIG_SOURCE}: 304 without a cached config to reuse"
                )
            return Reached(config=cached.config, raw=cached.raw, etag=cached.etag)
        return Reached(config=answer.config, raw=answer.raw, etag=answer.etag)

    def check_clock(self, now: datetime) -> None:
        """Say loudly when the host's clock and the control plane's disagree beyond the bound the
        offset is kept within: the clock then runs on the host clock plus the bound, not on the
        server's word, and no scheduled slot is planned on it (`AgentFacts.clock_off`)."""
        disagreement = self._clock.disagreement
        if disagreement is None:
            if self._clock_warned_at is not None:
                self._log.emit("clock.agrees", offset_seconds=self._clock.offset.total_seconds())
            self._clock_warned_at = None
            return
        warned = self._clock_warned_at
        if warned is not None and abs(now - warned) < CLOCK_WARNING_INTERVAL:
            return
        self._clock_warned_at = now
        self._log.emit(
            "clock.disagrees",
            level="warning",
            measured_offset_seconds=disagreement.total_seconds(),
            bound_seconds=MAX_SERVER_CLOCK_OFFSET.total_seconds(),
            detail="the host's clock and the control plane's differ beyond the bound; the "
            "offset is kept at the bound, and no scheduled slot is claimed or consumed until "
            "they agree (the control plane records the night's miss as host_clock) — fix the "
            "host's clock (NTP) or the control plane's",
        )

    def remember(self, reached: Reached, now: datetime) -> None:
        """Keep what the reach brought (in memory and in the cache); one line when it changed."""
        previous = self._cached
        config = reached.config
        if not self._synced_once or previous is None or previous.etag != reached.etag:
            self._log.emit(
                "config.synced" if not self._synced_once else "config.changed",
                etag=reached.etag,
                schedule=list(config.schedule.times) if config.schedule.enabled else "off",
                timezone=config.timezone,
                release=None if config.release is None else config.release.version,
                brake=config.brake.engaged,
                clock_offset_seconds=round(self._clock.offset.total_seconds(), 3),
            )
            self._synced_once = True
        self._cached = CachedConfig(
            config=config,
            raw=reached.raw,
            etag=reached.etag,
            synced_at=now,
            offset_seconds=self._clock.offset.total_seconds(),
        )
        try:
            self._cache.save(self._cached)
        except OSError as exc:
            # The cache is a convenience for offline minutes and `status`; a full disk must not
            # stop an update that needs no disk of its own before the claim.
            self._log.emit("config_cache.write_failed", level="warning", **error_fields(exc))
