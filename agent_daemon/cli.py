"""`nachtwacht agent enroll | run | status | hold | release-hold | update-now`.

Bad input prints one line naming the problem to stderr and exits 2; never a stack trace.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import httpx

from agent_daemon.activity import Activity, ActivityFile, ActivityRecord
from agent_daemon.config_cache import CachedConfig, ConfigCache
from agent_daemon.control_plane_client import ControlPlaneClient, FreshConfig
from agent_daemon.daemon import Daemon
from agent_daemon.daemon_loop import (
    IDLE_AFTER_SECONDS,
    STUCK_AFTER_SECONDS,
    DaemonLock,
    daemon_running,
    run_service,
)
from agent_daemon.daemon_state import StateStore
from agent_daemon.errors import AgentError, BadServerAnswer, ConfigError, DaemonStateError
from agent_daemon.event_log import EventLog
from agent_daemon.http_client import build_http_client, network_facts
from agent_daemon.network_cli import (
    add_network_options,
    log_network,
    network_fields,
    network_status_lines,
)
from agent_daemon.outbox import Outbox
from agent_daemon.server_clock import ServerClock
from agent_daemon.settings import (
    CONFIG_FORMAT_VERSION,
    DEFAULT_INSTALL_ROOT,
    DEFAULT_RESTART_COMMAND,
    UPDATER_DIR_NAME,
    AgentPaths,
    AgentSettings,
    load_settings,
    render_config,
    resolve_paths,
    write_config,
)
from agent_daemon.updater.on_demand import UpdaterOnDemand
from agent_daemon.updater.updater_settings import FIELD_INFO
from agent_daemon.updater.updater_state import UpdaterStateStore
from ground.clock import Clock, ClockConfigError, clock_from_env
from ground.contract import AgentConfig, HoldRequest, ReleaseTrack
from signed_release import ReleaseError

if TYPE_CHECKING:
    from agent_daemon.host_commands import FollowResult
    from agent_daemon.status import AgentStatus
    from agent_daemon.updater.updater import Updater

__all__ = ["main"]

STATE_FILE_NAME = "daemon-state.json"
CONFIG_CACHE_NAME = "config-cache.json"
OUTBOX_DIR_NAME = "outbox"
# `update-now` follows the run this long (real seconds): a download and a health check fit.
DEFAULT_FOLLOW_SECONDS = 1800.0
FOLLOW_POLL_SECONDS = 1.0
# On a fast fake clock the watchdog's bounds shrink with it, but never below what an unpack or a
# slow request takes in real time.
MIN_WATCHDOG_BOUND_SECONDS = 30.0


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # raise instead of exit
        raise _UsageError(f"{self.prog}: {message}")


def _default_platform() -> str:
    machine = platform.machine().lower() or "unknown"
    return f"{sys.platform}-{machine}"


def _add_path_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state-dir", help="state directory (default: $STATE_DIRECTORY, else a platform default)"
    )
    parser.add_argument("--config", help="config file (default: <state dir>/agent.toml)")


def _parser() -> _Parser:
    parser = _Parser(prog="nachtwacht agent", description="the updater on a customer host")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    enroll = commands.add_parser("enroll", help="write the agent's config (checks the credential)")
    _add_path_options(enroll)
    enroll.add_argument(
        "--url", required=True, help="the control plane, e.g. https://control.example"
    )
    enroll.add_argument(
        "--credential", required=True, help="the agent credential (nwa_…); '-' reads it from stdin"
    )
    enroll.add_argument(
        "--trusted-key",
        action="append",
        required=True,
        metavar="PATH",
        help="a release.pub to trust (repeat for key rotation)",
    )
    enroll.add_argument("--install-root", default=DEFAULT_INSTALL_ROOT)
    enroll.add_argument("--platform", default=_default_platform())
    enroll.add_argument("--channel", default="stable")
    enroll.add_argument(
        "--restart-command",
        default=shlex.join(DEFAULT_RESTART_COMMAND),
        help="restarts the managed agent service (split like a shell would)",
    )
    enroll.add_argument(
        "--health-command",
        help="must succeed and print the running version "
        "(default: <install root>/current/bin/provibr-agent health; not --version, which "
        "prints the installed build's version even while the old process still runs)",
    )
    # The defaults are the settings model's own, so `enroll` and `run` cannot disagree.
    enroll.add_argument(
        "--health-deadline-seconds",
        type=float,
        default=FIELD_INFO["health_deadline_seconds"].default,
    )
    enroll.add_argument(
        "--request-timeout-seconds",
        type=float,
        default=AgentSettings.model_fields["request_timeout_seconds"].default,
    )
    enroll.add_argument("--force", action="store_true", help="replace an existing config")
    add_network_options(enroll)

    run = commands.add_parser("run", help="run the daemon (what the systemd unit starts)")
    _add_path_options(run)

    status = commands.add_parser("status", help="schedule, next slot, last runs, daemon state")
    _add_path_options(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    _add_host_commands(commands)
    return parser


def _add_host_commands(commands: argparse._SubParsersAction[_Parser]) -> None:
    hold = commands.add_parser(
        "hold", help="skip scheduled updates until a date or time (the control plane records it)"
    )
    _add_path_options(hold)
    hold.add_argument(
        "--until",
        required=True,
        help="YYYY-MM-DD (that day's 00:00), 'YYYY-MM-DD HH:MM' or HH:MM (the next one), in the "
        "platform's time zone; or an instant with an offset (…Z)",
    )
    hold.add_argument("--reason", help="shown in the panel, e.g. 'database maintenance'")

    release = commands.add_parser("release-hold", help="end a hold: scheduled updates run again")
    _add_path_options(release)

    now = commands.add_parser(
        "update-now", help="ask for an update now and follow it to its outcome (exit 0 or 1)"
    )
    _add_path_options(now)
    now.add_argument(
        "--timeout-seconds",
        type=float,
        default=DEFAULT_FOLLOW_SECONDS,
        help=f"stop following after this long (default {DEFAULT_FOLLOW_SECONDS:g}); the update "
        "goes on",
    )


def main(argv: list[str]) -> int:
    try:
        args = _parser().parse_args(argv)
    except _UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    paths = resolve_paths(state_dir=args.state_dir, config_file=args.config, environ=os.environ)
    try:
        if args.command == "enroll":
            return _enroll(args, paths)
        if args.command == "run":
            return _run(paths)
        if args.command == "hold":
            return _hold(paths, until=args.until, reason=args.reason)
        if args.command == "release-hold":
            return _release_hold(paths)
        if args.command == "update-now":
            return _update_now(paths, timeout_seconds=args.timeout_seconds)
        return _status(paths, as_json=args.json)
    except (AgentError, ReleaseError, ClockConfigError) as exc:
        # One format for every line (a bad config file may name several fields).
        for line in str(exc).splitlines() or [type(exc).__name__]:
            print(f"nachtwacht agent {args.command}: {line}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"nachtwacht agent {args.command}: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2


# -- enroll -------------------------------------------------------------------------------------


def _enroll(args: argparse.Namespace, paths: AgentPaths) -> int:
    if paths.config_file.exists() and not args.force:
        raise ConfigError(f"{paths.config_file}: already exists (use --force to replace it)")
    credential = sys.stdin.readline().strip() if args.credential == "-" else args.credential
    install_root = Path(args.install_root)
    health = args.health_command or shlex.join(
        [str(install_root / "current" / "bin" / "provibr-agent"), "health"]
    )
    fields: dict[str, str | float | bool | list[str]] = {
        "control_url": args.url.rstrip("/"),
        "credential": credential,
        "agent_id": "pending",
        "trusted_keys": [str(Path(p).absolute()) for p in args.trusted_key],
        "install_root": str(install_root),
        "platform": args.platform,
        "channel": args.channel,
        "restart_command": shlex.split(args.restart_command),
        "health_command": shlex.split(health),
        "health_deadline_seconds": args.health_deadline_seconds,
        "request_timeout_seconds": args.request_timeout_seconds,
        **network_fields(args),
    }
    # Validate everything the file will hold before talking to anyone: the same checks as `run`.
    staging = paths.config_file.with_name(f".{paths.config_file.name}.enroll")
    write_config(staging, render_config(fields))
    try:
        settings = load_settings(AgentPaths(state_dir=paths.state_dir, config_file=staging))
        clock = ServerClock(clock_from_env())
        with _http_client(settings, clock) as http:
            answer = ControlPlaneClient(
                http=http, server_clock=clock, track=_track_of(settings)
            ).fetch_config(etag=None)
        if not isinstance(answer, FreshConfig):
            raise BadServerAnswer("GET /v1/agent/config: 304 although no ETag was sent")
        fields["agent_id"] = str(answer.config.agent_id)
        write_config(paths.config_file, render_config(fields))
        ConfigCache(paths.state_dir / CONFIG_CACHE_NAME).save(
            CachedConfig(
                config=answer.config,
                raw=answer.raw,
                etag=answer.etag,
                synced_at=clock.now(),
                offset_seconds=clock.offset.total_seconds(),
            )
        )
    finally:
        staging.unlink(missing_ok=True)
    name = answer.config.name or str(answer.config.agent_id)
    print(f"enrolled agent {name} ({answer.config.agent_id}) with {fields['control_url']}")
    print(f"config written to {paths.config_file} (mode 0600)")
    print(f"state directory {paths.state_dir}")
    route = network_facts(settings.control_url, settings.network, os.environ)["route"]
    print(f"control plane reached {route}")
    return 0


# -- run ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class _Parts:
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
) -> _Parts:
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
    http = _http_client(settings, server_clock, transport=transport)
    download_http = _http_client(settings, server_clock, transport=transport)
    daemon = Daemon(
        control=ControlPlaneClient(http=http, server_clock=server_clock, track=_track_of(settings)),
        updater=_build_updater(
            settings,
            http=download_http,
            clock=server_clock.expiry_clock(),
            on_progress=activity.progress,
        ),
        state_store=StateStore(settings.state_dir / STATE_FILE_NAME),
        config_cache=ConfigCache(settings.state_dir / CONFIG_CACHE_NAME),
        outbox=Outbox(settings.state_dir / OUTBOX_DIR_NAME),
        server_clock=server_clock,
        log=log,
        stop_requested=stop.is_set,
    )
    return _Parts(
        http=http,
        download_http=download_http,
        daemon=daemon,
        clock=server_clock,
        log=log,
        activity=activity,
    )


def _track_of(settings: AgentSettings) -> ReleaseTrack:
    """The (channel, platform) this agent follows, as the config poll and the claim name it."""
    return ReleaseTrack(channel=settings.updater.channel, platform=settings.updater.platform)


def _build_updater(
    settings: AgentSettings,
    *,
    http: httpx.Client,
    clock: Clock,
    on_progress: Callable[[str, float, float], None] | None = None,
) -> UpdaterOnDemand:
    def build() -> Updater:
        # Imported on the first update: an idle daemon never loads the updater (issue 16).
        from agent_daemon.updater.updater import Updater

        return Updater(settings=settings.updater, client=http, clock=clock, on_progress=on_progress)

    return UpdaterOnDemand(settings=settings.updater, build=build)


def _http_client(
    settings: AgentSettings, clock: Clock, *, transport: httpx.BaseTransport | None = None
) -> httpx.Client:
    return build_http_client(
        base_url=settings.control_url,
        credential=settings.credential,
        timeout_seconds=clock.real_seconds(settings.request_timeout_seconds),
        transport=transport,
        network=settings.network,
    )


def _run(paths: AgentPaths, environ: Mapping[str, str] = os.environ) -> int:
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


# -- hold, release-hold, update-now --------------------------------------------------------------


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
        http=http, server_clock=session.clock, track=_track_of(session.settings)
    )


def _hold(paths: AgentPaths, *, until: str, reason: str | None) -> int:
    session = _host_session(paths)
    zone = _zone_of(session)
    # The host verbs' and status's modules are imported by those verbs only: the daemon, which
    # shares this module, never holds them (issue 16, footprint).
    from agent_daemon.host_commands import parse_until

    at = parse_until(until, now=session.clock.now(), zone=zone)
    request = HoldRequest(until=at, reason=reason)
    with _http_client(session.settings, session.clock) as http:
        held = _host_client(session, http).set_hold(request)
    local = held.until.astimezone(zone)
    print(f"held until {local:%Y-%m-%d %H:%M} {zone} ({held.until:%Y-%m-%dT%H:%M:%SZ})")
    print("scheduled updates until then are skipped and recorded with the reason 'held';")
    print("the daemon learns of it at its next minute. End it early: nachtwacht agent release-hold")
    return 0


def _release_hold(paths: AgentPaths) -> int:
    session = _host_session(paths)
    with _http_client(session.settings, session.clock) as http:
        _host_client(session, http).release_hold()
    print("hold released: scheduled updates run again from the next slot")
    return 0


def _update_now(paths: AgentPaths, *, timeout_seconds: float) -> int:
    session = _host_session(paths)
    with _http_client(session.settings, session.clock) as http:
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
    from agent_daemon.status import describe_run

    print(describe_run(result.record, _zone_of(session)))
    return 0 if result.succeeded else 1


def _follow(session: _HostSession, run_id: str, *, timeout_seconds: float) -> FollowResult:
    from agent_daemon.host_commands import follow_manual_update

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


# -- status -------------------------------------------------------------------------------------


def _status(paths: AgentPaths, *, as_json: bool) -> int:
    from agent_daemon.status import AgentStatus, render_status

    settings = load_settings(paths)
    clock = clock_from_env()
    cache = ConfigCache(settings.state_dir / CONFIG_CACHE_NAME)
    cached = cache.load()
    server_clock = ServerClock(clock)
    if cached is not None:
        server_clock.learn_offset_seconds(cached.offset_seconds)
    state = StateStore(settings.state_dir / STATE_FILE_NAME).load()
    try:
        pending = len(Outbox(settings.state_dir / OUTBOX_DIR_NAME).pending())
    except DaemonStateError:
        pending = -1
    status = AgentStatus(
        agent_id=settings.agent_id,
        control_url=settings.control_url,
        daemon_pid=daemon_running(settings.state_dir),
        cached=cached,
        state=state,
        pending_reports=pending,
        installed_version=_installed_version(settings, server_clock),
        now=server_clock.now(),
        updater_step=_updater_step(settings),
        activity=_activity_of(settings),
        track=_track_of(settings),
    )
    network = network_facts(settings.control_url, settings.network, os.environ)
    if as_json:
        document = _status_json(status)
        document["network"] = network
        print(json.dumps(document, indent=2, default=str))
    else:
        print(render_status(status))
        print(network_status_lines(network))
    return 0


def _activity_of(settings: AgentSettings) -> ActivityRecord | None:
    try:
        return ActivityFile(settings.state_dir).load()
    except DaemonStateError:
        return None  # status still has the rest to say


def _installed_version(settings: AgentSettings, clock: Clock) -> str | None:
    current = settings.updater.install_root / "current"
    if not current.exists():
        return None
    try:
        with _http_client(settings, clock) as http:
            return _build_updater(settings, http=http, clock=clock).installed_version()
    except (AgentError, ReleaseError) as exc:
        # Status still has much to say when, say, a trusted key file went missing.
        return f"unknown ({exc})"


def _updater_step(settings: AgentSettings) -> str | None:
    try:
        progress = UpdaterStateStore(settings.state_dir / UPDATER_DIR_NAME).load().in_progress
    except DaemonStateError as exc:
        return f"state unreadable ({exc})"
    if progress is None:
        return None
    source = progress.from_version or "nothing"
    return f"{progress.step}: {source} -> {progress.version} (run {progress.run_id})"


def _status_json(status: AgentStatus) -> dict[str, object]:
    from agent_daemon.status import problems

    cached = status.cached
    return {
        "format_version": CONFIG_FORMAT_VERSION,
        "agent_id": status.agent_id,
        "control_url": status.control_url,
        "daemon_running": status.daemon_pid is not None,
        "daemon_pid": status.daemon_pid if (status.daemon_pid or 0) > 0 else None,
        "installed_version": status.installed_version,
        "config": None if cached is None else cached.raw,
        "config_synced_at": None if cached is None else cached.synced_at.isoformat(),
        "clock_offset_seconds": None if cached is None else cached.offset_seconds,
        "state": status.state.model_dump(mode="json"),
        "pending_reports": status.pending_reports,
        "updater_step": status.updater_step,
        "activity": None if status.activity is None else status.activity.model_dump(mode="json"),
        "problems": problems(status),
    }
