"""`nachtwacht agent status`: gathers what `agent_daemon.host.status` words — the cached config, the
daemon's state, activity and outbox files, whether the daemon runs, the installed version and the
updater's step in progress — and prints it as text or as one JSON document (`--json`).

It reads, never writes, contacts nothing and runs nothing the config names, and a file it cannot
read becomes a line of the answer, not a failure. So root may run it on a daemon that runs as its
own user (the non-root mode): the config is that user's, and is read for display only.
Only `status` imports this module, so the daemon never holds it (docs/agent_daemon.md,
"Footprint").
"""

from __future__ import annotations

import json
import os
import shutil

from agent_daemon.commands.agent_parts import (
    CONFIG_CACHE_NAME,
    OUTBOX_DIR_NAME,
    STATE_FILE_NAME,
    track_of,
)
from agent_daemon.commands.network_cli import network_status_lines
from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.http_client import network_facts
from agent_daemon.connection.outbox import Outbox, SetAside, SetAsideReports
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import DaemonState, StateStore
from agent_daemon.disk.held_trust_root import (
    TRUST_ROOT_FILE_NAME,
    HeldTrustRoot,
    HeldTrustRootFile,
)
from agent_daemon.disk.unreachable_file import (
    UNREACHABLE_FILE_NAME,
    UnreachableSlot,
    UnreachableSlotsFile,
)
from agent_daemon.errors import DaemonStateError
from agent_daemon.host.activity import ActivityFile, ActivityRecord
from agent_daemon.host.status import (
    SET_ASIDE_SHOWN,
    AgentStatus,
    describe_offer_note,
    describe_set_aside,
    pending_update_now,
    problems,
    render_status,
)
from agent_daemon.minute.daemon_loop import daemon_running
from agent_daemon.self_update.own_builds import (
    RunningBuild,
    running_build,
    self_update_off_reason,
)
from agent_daemon.settings import (
    CONFIG_FORMAT_VERSION,
    UPDATER_DIR_NAME,
    AgentPaths,
    AgentSettings,
    load_settings,
)
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.updater_state import UpdaterStateStore
from ground.clock import clock_from_env
from ground.contract import UNREACHABLE_PATH
from ground.instants import format_instant

__all__ = ["show_status"]


def show_status(paths: AgentPaths, *, as_json: bool) -> int:
    settings = load_settings(paths, for_display=True)
    clock = clock_from_env()
    cache = ConfigCache(settings.state_dir / CONFIG_CACHE_NAME)
    unreadable: list[str] = []
    if not settings.state_dir.is_dir():
        unreadable.append(
            f"there is no state directory at {settings.state_dir}: no daemon has run with it, so "
            "nothing below says what a daemon did — if the daemon runs with another state "
            "directory, name it (--state-dir)"
        )
    try:
        cached = cache.load()
    except DaemonStateError as exc:
        cached = None
        unreadable.append(
            f"the cached config cannot be read ({exc}): the daemon fetches it again at its next "
            "minute that reaches the control plane; until then status shows no schedule"
        )
    server_clock = ServerClock(clock)
    if cached is not None:
        server_clock.learn_offset_seconds(cached.offset_seconds)
    state_file = settings.state_dir / STATE_FILE_NAME
    try:
        state = StateStore(state_file).load()
    except DaemonStateError as exc:
        state = DaemonState()
        unreadable.append(
            f"the daemon's state file cannot be read ({exc}): the daemon plans and updates "
            f"nothing while it cannot know which slots it used (one tick.failed line a minute) — "
            f"move it aside (mv {state_file} {state_file}.unreadable) and the daemon starts "
            "afresh at its next minute; status shows no runs meanwhile"
        )
    try:
        reports = Outbox(settings.state_dir / OUTBOX_DIR_NAME).pending()
        pending = len(reports)
    except DaemonStateError:
        reports, pending = [], -1
    trust_root, trust_root_error = _trust_root_of(settings)
    status = AgentStatus(
        state_dir=settings.state_dir,
        state_dir_free_bytes=_free_bytes(settings),
        unreadable_files=tuple(unreadable),
        set_aside=_set_aside_of(settings),
        agent_id=settings.agent_id,
        control_url=settings.control_url,
        daemon_pid=daemon_running(settings.state_dir),
        cached=cached,
        state=state,
        pending_reports=pending,
        installed_version=InstallLayout(settings.updater.install_root).link_target("current"),
        now=server_clock.now(),
        updater_step=_updater_step(settings),
        activity=_activity_of(settings),
        track=track_of(settings),
        trust_root=trust_root,
        trust_root_error=trust_root_error,
        unreachable_slots=_unreachable_slots(settings),
        unreachable_reports_waiting=tuple(
            report.slot_key
            for report in reports
            if report.path == UNREACHABLE_PATH and report.slot_key is not None
        ),
    )
    network = network_facts(settings.control_url, settings.network, os.environ)
    own_build = running_build()
    if as_json:
        document = _status_json(status)
        document["network"] = network
        off = self_update_off_reason(own_build)
        document["self_update"] = (
            {"enabled": False, "reason": off}
            if own_build is None or off is not None
            else {
                "enabled": True,
                "version": own_build.version,
                "own_root": str(own_build.own_root),
            }
        )
        print(json.dumps(document, indent=2, default=str))
    else:
        print(render_status(status))
        print(_self_update_line(own_build))
        print(network_status_lines(network))
    return 0


def _self_update_line(own_build: RunningBuild | None) -> str:
    """Whether this daemon updates itself, and if not, why: one line."""
    off = self_update_off_reason(own_build)
    if own_build is None or off is not None:
        return f"self-update: off, {off}"
    return (
        f"self-update: on, nachtwacht's own agent {own_build.version} "
        f"from {own_build.own_root / 'versions' / own_build.version}"
    )


def _trust_root_of(settings: AgentSettings) -> tuple[HeldTrustRoot | None, str | None]:
    # Checked as the daemon checks it: the config file's owner is the daemon's user.
    held = HeldTrustRootFile(
        settings.state_dir / TRUST_ROOT_FILE_NAME, daemon_uid=_daemon_uid(settings)
    )
    try:
        return held.load(), None
    except DaemonStateError as exc:
        return None, str(exc)


def _free_bytes(settings: AgentSettings) -> int | None:
    try:
        return shutil.disk_usage(settings.state_dir).free
    except OSError:
        return None


def _daemon_uid(settings: AgentSettings) -> int | None:
    try:
        return settings.config_file.stat().st_uid
    except OSError:
        return None


def _activity_of(settings: AgentSettings) -> ActivityRecord | None:
    try:
        return ActivityFile(settings.state_dir).load()
    except DaemonStateError:
        return None  # status still has the rest to say


def _updater_step(settings: AgentSettings) -> str | None:
    try:
        progress = UpdaterStateStore(settings.state_dir / UPDATER_DIR_NAME).load().in_progress
    except DaemonStateError as exc:
        return f"state unreadable ({exc})"
    if progress is None:
        return None
    source = progress.from_version or "nothing"
    return f"{progress.step}: {source} -> {progress.version} (run {progress.run_id})"


def _set_aside_of(settings: AgentSettings) -> SetAsideReports | None:
    try:
        return Outbox(settings.state_dir / OUTBOX_DIR_NAME).set_aside(newest=SET_ASIDE_SHOWN)
    except OSError:
        return None  # status still has the rest to say


def _unreachable_slots(settings: AgentSettings) -> tuple[UnreachableSlot, ...]:
    try:
        return UnreachableSlotsFile(settings.state_dir / UNREACHABLE_FILE_NAME).load().slots
    except DaemonStateError:
        return ()


def _status_json(status: AgentStatus) -> dict[str, object]:
    cached = status.cached
    pending = pending_update_now(status)
    return {
        "format_version": CONFIG_FORMAT_VERSION,
        "agent_id": status.agent_id,
        "control_url": status.control_url,
        "daemon_running": status.daemon_pid is not None,
        "daemon_pid": status.daemon_pid if (status.daemon_pid or 0) > 0 else None,
        "installed_version": status.installed_version,
        # None: no trust root held, the trusted-key files are trusted.
        "trust_root": None
        if status.trust_root is None
        else {
            "version": status.trust_root.version,
            "expires": format_instant(status.trust_root.expires),
            "expired": status.trust_root.is_expired(status.now),
        },
        "trust_root_error": status.trust_root_error,
        "config": None if cached is None else cached.raw,
        "config_synced_at": None if cached is None else cached.synced_at.isoformat(),
        # Why it is not updated to its pair's newest release (the config's `offer_note`), worded.
        "newest_release_note": None
        if cached is None
        else describe_offer_note(cached.config.offer_note, status.installed_version),
        "clock_offset_seconds": None if cached is None else cached.offset_seconds,
        "state": status.state.model_dump(mode="json"),
        "pending_reports": status.pending_reports,
        "updater_step": status.updater_step,
        "activity": None if status.activity is None else status.activity.model_dump(mode="json"),
        # An update requested now that the daemon has not taken up yet (as of the last sync).
        "update_now_pending": None if pending is None else pending.model_dump(mode="json"),
        # Slots tried through while the control plane could not be reached, not yet told to it.
        "unreachable_slots": [slot.model_dump(mode="json") for slot in status.unreachable_slots],
        # Their reports queued in the outbox, not delivered yet (the slots' keys).
        "unreachable_reports_waiting": list(status.unreachable_reports_waiting),
        # Reports set aside in the outbox's `rejected/`, never sent again (None: unreadable).
        "set_aside_reports": None
        if status.set_aside is None
        else {
            "count": status.set_aside.count,
            "directory": str(status.set_aside.directory),
            "newest": [_set_aside_json(item, status) for item in status.set_aside.newest],
        },
        # The cached config's and the daemon state's files when they cannot be read, worded.
        "unreadable_files": list(status.unreadable_files),
        "state_dir_free_bytes": status.state_dir_free_bytes,
        "problems": problems(status),
    }


def _set_aside_json(item: SetAside, status: AgentStatus) -> dict[str, object]:
    report = item.report
    return {
        "file": str(item.path),
        "set_aside_at": format_instant(item.at),
        "slot_key": None if report is None else report.slot_key,
        "run_id": None if report is None else report.run_id,
        "method": None if report is None else report.method,
        "path": None if report is None else report.path,
        # The note as written beside it: `status` and `detail` (refused), `given_up`, `reason`.
        "why": item.why,
        "unreadable": item.problem,
        "words": describe_set_aside(item, status.zone, status.now),
    }
