"""`nachtwacht agent run`, the daemon's start-up: one daemon per state directory (its lock), every
part of a running daemon built in one place (`build_daemon`), the start-up lines, then the service
(`daemon_loop.run_service`) until it stops.

This is the path the systemd unit starts, so it imports only what an idle minute needs
(docs/agent_daemon.md, "Footprint"): `status` and the host verbs live in modules of their own.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from agent_daemon.commands.agent_parts import (
    CONFIG_CACHE_NAME,
    OUTBOX_DIR_NAME,
    STATE_FILE_NAME,
    build_updater,
    http_client_for,
    track_of,
)
from agent_daemon.commands.network_cli import log_network
from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.outbox import Outbox
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import StateStore
from agent_daemon.disk.held_trust_root import TRUST_ROOT_FILE_NAME, HeldTrustRootFile
from agent_daemon.errors import DaemonStateError
from agent_daemon.host.activity import Activity, ActivityFile
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.daemon import Daemon
from agent_daemon.minute.daemon_loop import (
    IDLE_AFTER_SECONDS,
    STUCK_AFTER_SECONDS,
    DaemonLock,
    run_service,
)
from agent_daemon.minute.trust_root_follow import TrustRootFollower
from agent_daemon.settings import AgentPaths, AgentSettings, load_settings
from ground.clock import Clock, clock_from_env
from ground.contract import AgentConfig

__all__ = ["DaemonParts", "build_daemon", "run_daemon"]

# On a fast fake clock the watchdog's bounds shrink with it, but never below what an unpack or a
# slow request takes in real time.
MIN_WATCHDOG_BOUND_SECONDS = 30.0


@dataclass(frozen=True, kw_only=True)
class DaemonParts:
    http: httpx.Client
    # The updater's own client (same settings): a download then never reuses a connection the
    # config sync left open, so its deadline's watchdog sees the connection it must bound.
    download_http: httpx.Client
    daemon: Daemon
    clock: ServerClock
    log: EventLog
    activity: Activity


def build_daemon(
    settings: AgentSettings,
    *,
    clock: Clock,
    stop: threading.Event,
    transport: httpx.BaseTransport | None = None,
) -> DaemonParts:
    """Every part of a running daemon, built in one place (tests pass a `transport=`)."""
    server_clock = ServerClock(clock)
    log = EventLog(now=server_clock.now)
    activity = Activity(
        now=server_clock.now,
        log=log,
        file=ActivityFile(settings.state_dir),
        stuck_after=max(clock.real_seconds(STUCK_AFTER_SECONDS), MIN_WATCHDOG_BOUND_SECONDS),
        idle_after=max(clock.real_seconds(IDLE_AFTER_SECONDS), MIN_WATCHDOG_BOUND_SECONDS),
        pid=os.getpid(),
    )
    http = http_client_for(settings, server_clock, transport=transport)
    download_http = http_client_for(settings, server_clock, transport=transport)
    control = ControlPlaneClient(http=http, server_clock=server_clock, track=track_of(settings))
    expiry_clock = server_clock.expiry_clock()
    daemon = Daemon(
        control=control,
        updater=build_updater(
            settings,
            http=download_http,
            clock=expiry_clock,
            on_progress=activity.progress,
        ),
        state_store=StateStore(settings.state_dir / STATE_FILE_NAME),
        config_cache=ConfigCache(settings.state_dir / CONFIG_CACHE_NAME),
        outbox=Outbox(settings.state_dir / OUTBOX_DIR_NAME),
        server_clock=server_clock,
        log=log,
        stop_requested=stop.is_set,
        trust_roots=TrustRootFollower(
            control=control,
            held_file=HeldTrustRootFile(settings.state_dir / TRUST_ROOT_FILE_NAME),
            legacy_release_keys=settings.updater.trusted_keys.raw(),
            log=log,
            expiry_now=expiry_clock.now,
        ),
    )
    return DaemonParts(
        http=http,
        download_http=download_http,
        daemon=daemon,
        clock=server_clock,
        log=log,
        activity=activity,
    )


def run_daemon(paths: AgentPaths, environ: Mapping[str, str] = os.environ) -> int:
    settings = load_settings(paths)
    clock = clock_from_env(environ)
    lock = DaemonLock(settings.state_dir)
    lock.acquire()
    stop = threading.Event()
    try:
        parts = build_daemon(settings, clock=clock, stop=stop)
        if clock.is_fake:
            parts.log.emit("clock.fake", level="warning", clock=clock.describe())
            print(f"!!! {clock.describe()} !!!", file=sys.stderr, flush=True)
        parts.log.emit(
            "daemon.starting",
            agent_id=settings.agent_id,
            control_url=settings.control_url,
            state_dir=str(settings.state_dir),
            install_root=str(settings.updater.install_root),
            pid=os.getpid(),
        )
        log_network(parts.log, settings, environ)
        with parts.http, parts.download_http:
            return run_service(
                daemon=parts.daemon,
                clock=parts.clock,
                agent_id=settings.agent_id,
                log=parts.log,
                environ=environ,
                stop=stop,
                activity=parts.activity,
                read_config=lambda: _cached_config(settings),
            )
    finally:
        lock.release()


def _cached_config(settings: AgentSettings) -> AgentConfig | None:
    try:
        cached = ConfigCache(settings.state_dir / CONFIG_CACHE_NAME).load()
    except DaemonStateError:
        return None
    return None if cached is None else cached.config
