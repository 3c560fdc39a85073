"""`nachtwacht agent hold | release-hold | update-now`, the verbs a person on the host types: each
loads the settings and the cached config (the platform's zone, the server clock's offset), asks
the control plane once, and says what follows in words; `update-now` then follows its run to the
outcome. What the words mean lives in `host_commands` (`--until`, the following) and `status`.

Only these verbs import this module, so the daemon never holds it (docs/agent_daemon.md,
"Footprint").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from zoneinfo import ZoneInfo

import httpx

from agent_daemon.commands.agent_parts import (
    CONFIG_CACHE_NAME,
    STATE_FILE_NAME,
    http_client_for,
    track_of,
)
from agent_daemon.commands.host_commands import (
    FollowResult,
    checked_reason,
    follow_manual_update,
    parse_until,
)
from agent_daemon.connection.config_cache import CachedConfig, ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.host.activity import ActivityFile
from agent_daemon.host.status import describe_run
from agent_daemon.minute.daemon_loop import daemon_running
from agent_daemon.settings import AgentPaths, AgentSettings, load_settings
from ground.clock import clock_from_env
from ground.contract import HoldRequest

__all__ = ["hold", "release_hold", "update_now"]

FOLLOW_POLL_SECONDS = 1.0


@dataclass(frozen=True, kw_only=True)
class _HostSession:
    settings: AgentSettings
    clock: ServerClock
    cached: CachedConfig | None


def _host_session(paths: AgentPaths) -> _HostSession:
    settings = load_settings(paths)
    clock = ServerClock(clock_from_env())
    cached = ConfigCache(settings.state_dir / CONFIG_CACHE_NAME).load()
    if cached is not None:
        clock.learn_offset_seconds(cached.offset_seconds)
    return _HostSession(settings=settings, clock=clock, cached=cached)


def _zone_of(session: _HostSession) -> ZoneInfo:
    # The platform's zone, which the schedule and the panel use; UTC before the first sync.
    return ZoneInfo(session.cached.config.timezone if session.cached else "UTC")


def _host_client(session: _HostSession, http: httpx.Client) -> ControlPlaneClient:
    return ControlPlaneClient(
        http=http, server_clock=session.clock, track=track_of(session.settings)
    )


def hold(paths: AgentPaths, *, until: str, reason: str | None) -> int:
    session = _host_session(paths)
    zone = _zone_of(session)
    at = parse_until(until, now=session.clock.now(), zone=zone)
    request = HoldRequest(until=at, reason=checked_reason(reason))
    with http_client_for(session.settings, session.clock) as http:
        held = _host_client(session, http).set_hold(request)
    local = held.until.astimezone(zone)
    print(f"held until {local:%Y-%m-%d %H:%M} {zone} ({held.until:%Y-%m-%dT%H:%M:%SZ})")
    print("scheduled updates until then are skipped and recorded with the reason 'held';")
    print("the daemon learns of it at its next minute. End it early: nachtwacht agent release-hold")
    return 0


def release_hold(paths: AgentPaths) -> int:
    session = _host_session(paths)
    with http_client_for(session.settings, session.clock) as http:
        _host_client(session, http).release_hold()
    print("hold released: scheduled updates run again from the next slot")
    return 0


def update_now(paths: AgentPaths, *, timeout_seconds: float) -> int:
    session = _host_session(paths)
    with http_client_for(session.settings, session.clock) as http:
        requested = _host_client(session, http).request_manual_update()
    run_id = str(requested.run_id)
    print(f"update requested (run {run_id}); following it", flush=True)
    try:
        result = _follow(session, run_id, timeout_seconds=timeout_seconds)
    except KeyboardInterrupt:
        # Ctrl-C stops the following, not the update: the daemon carries on with the run.
        print(f"stopped following run {run_id}; the update goes on (see `nachtwacht agent status`)")
        return 130
    if result.record is None:
        return 1
    print(describe_run(result.record, _zone_of(session)))
    return 0 if result.succeeded else 1


def _follow(session: _HostSession, run_id: str, *, timeout_seconds: float) -> FollowResult:
    state_dir = session.settings.state_dir
    return follow_manual_update(
        run_id,
        state=StateStore(state_dir / STATE_FILE_NAME),
        activity=ActivityFile(state_dir),
        daemon_running=lambda: daemon_running(state_dir) is not None,
        say=lambda words: print(f"  {words}", flush=True),
        sleep=time.sleep,
        poll_seconds=FOLLOW_POLL_SECONDS,
        timeout_seconds=timeout_seconds,
        monotonic=time.monotonic,
    )
