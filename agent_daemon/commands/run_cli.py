"""`nachtwacht agent run`, the daemon's start-up: one daemon per state directory (its lock), every
part of a running daemon built in one place (`build_daemon`), the start-up lines, then the service
(`daemon_loop.run_service`) until it stops.

A start that fails is written as journald error lines (`<3>`, like the daemon's own error lines,
so `journalctl -p warning` shows it) and ends with an exit status that tells systemd whether to
try again: `EXIT_CONFIG_ERROR` (78, sysexits' EX_CONFIG) when the configuration cannot work until
someone changes it — no config, an unsafe or invalid one, a proxy or CA file that cannot be used,
a bad fake clock — which the unit's `RestartPreventExitStatus=78` does not restart every few
seconds; `EXIT_START_FAILED` (2) for anything else (another daemon holds the state directory, a
state file or the disk fails), which a restart may cure.

This is the path the systemd unit starts, so it imports only what an idle minute needs
(docs/agent_daemon.md, "Footprint"): `status` and the host verbs live in modules of their own.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from agent_daemon.commands.agent_parts import (
    CONFIG_CACHE_NAME,
    OUTBOX_DIR_NAME,
    STATE_FILE_NAME,
    build_self_updater,
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
from agent_daemon.errors import AgentError, ConfigError, DaemonStateError
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
from agent_daemon.self_update.own_builds import (
    RunningBuild,
    running_build,
    self_update_off_reason,
)
from agent_daemon.self_update.pending_switch import SelfUpdateCheckIn, read_switch_outcome
from agent_daemon.settings import AgentPaths, AgentSettings, load_settings
from ground.clock import Clock, ClockConfigError, clock_from_env
from ground.contract import AgentConfig
from signed_release.errors import ReleaseError

if TYPE_CHECKING:
    from agent_daemon.self_update.seam import SelfInstall

__all__ = ["EXIT_CONFIG_ERROR", "EXIT_START_FAILED", "DaemonParts", "build_daemon", "run_daemon"]

EXIT_CONFIG_ERROR = 78
EXIT_START_FAILED = 2
# journald's priority prefix for an error line (the event log's `<3>`).
_ERROR_PREFIX = "<3>"

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
    check_in: SelfUpdateCheckIn | None = None,
    self_install: SelfInstall | None = None,
    updater_version: str | None = None,
) -> DaemonParts:
    """Every part of a running daemon, built in one place (tests pass a `transport=`).

    `self_install` is the host's mechanism that installs a verified updater bundle and switches to
    it, and `updater_version` the version of this updater: with both, the daemon takes the
    updater releases the control plane offers (`self_update.seam`); without, it never
    plans a self-update."""
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
        self_update=None
        if self_install is None
        else build_self_updater(
            settings,
            http=download_http,
            clock=expiry_clock,
            running=updater_version,
            install=self_install,
        ),
        check_in=check_in,
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
    """Run until stopped (exit 0), or say why the daemon cannot start and exit with the status
    that tells systemd whether to try again."""
    try:
        return _run(paths, environ)
    except (ConfigError, ClockConfigError) as exc:
        _say_fatal(str(exc))
        return EXIT_CONFIG_ERROR
    except (AgentError, ReleaseError) as exc:
        _say_fatal(str(exc))
        return EXIT_START_FAILED
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        _say_fatal(f"{where}{exc.strerror or exc}")
        return EXIT_START_FAILED


def _say_fatal(message: str) -> None:
    # One line per problem (a bad config file may name several fields), each an error line.
    for line in message.splitlines() or ["the daemon could not start"]:
        print(f"{_ERROR_PREFIX}nachtwacht agent run: {line}", file=sys.stderr, flush=True)


def _run(paths: AgentPaths, environ: Mapping[str, str]) -> int:
    settings = load_settings(paths)
    clock = clock_from_env(environ)
    lock = DaemonLock(settings.state_dir)
    lock.acquire()
    stop = threading.Event()
    try:
        # Read before anything else: `current`, which led here, may move later.
        running = running_build()
        check_in = SelfUpdateCheckIn(state_dir=settings.state_dir, running=running)
        parts = build_daemon(
            settings,
            clock=clock,
            stop=stop,
            check_in=check_in,
            self_install=_host_self_install(settings, running),
            updater_version=None if running is None else running.version,
        )
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
        _start_own_build(parts.log, check_in)
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


def _host_self_install(settings: AgentSettings, running: RunningBuild | None) -> SelfInstall | None:
    """How this host installs a build of the updater: only a build installed as one of the own
    builds (`<own root>/versions/<v>/venv`) can be replaced by the next; a pip install or a
    development checkout never plans a self-update."""
    if running is None or self_update_off_reason(running) is not None:
        return None
    from agent_daemon.self_update.host_install import HostSelfInstall

    return HostSelfInstall(own_root=running.own_root, state_dir=settings.state_dir)


def _start_own_build(log: EventLog, check_in: SelfUpdateCheckIn) -> None:
    """Tell the guard this build started, and say what became of the last switch of the
    updater's own build (kept for the report until `clear_switch_outcome`)."""
    try:
        check_in.started()
        outcome = read_switch_outcome(check_in.state_dir)
    except AgentError as exc:
        log.emit("self_update.unreadable", level="warning", error=str(exc))
        return
    running = check_in.running
    if running is not None:
        log.emit("self_update.build", version=running.version, own_root=str(running.own_root))
    off = self_update_off_reason(running)
    if off is not None:
        log.emit("self_update.off", reason=off, prefix=sys.prefix)
    if outcome is not None and outcome.outcome == "rolled_back":
        log.emit(
            "self_update.rolled_back",
            level="warning",
            failed_version=outcome.failed_version,
            restored_version=outcome.running_version,
            reason=outcome.reason,
        )


def _cached_config(settings: AgentSettings) -> AgentConfig | None:
    try:
        cached = ConfigCache(settings.state_dir / CONFIG_CACHE_NAME).load()
    except DaemonStateError:
        return None
    return None if cached is None else cached.config
