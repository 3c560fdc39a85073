"""`nachtwacht agent status`: what a person on the host wants to know, from the files on disk.

It reads, never writes: the cached config (schedule, zone, release, brake, when it was synced), the
daemon's state file (last runs, the update in progress), the outbox, and the daemon's lock (is it
running). It works while the daemon runs, while it is stopped, and while the host is offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from agent_daemon.config_cache import CachedConfig
from agent_daemon.daemon_state import DaemonState, RunRecord
from ground.contract import RefusalCode
from shared_planner import next_slot

__all__ = ["AgentStatus", "describe_run", "render_status"]

_OUTCOME_WORDS: dict[str, str] = {
    "up_to_date": "already up to date",
    "succeeded": "updated",
    "failed": "update failed",
    "rolled_back": "update failed and was rolled back",
    RefusalCode.SLOT_CONSUMED: "already handled (control plane)",
    RefusalCode.WINDOW_CLOSED: "window closed before the claim",
    RefusalCode.NOT_A_SLOT: "not a slot on the control plane's schedule",
}


@dataclass(frozen=True, kw_only=True)
class AgentStatus:
    agent_id: str
    control_url: str
    daemon_pid: int | None
    cached: CachedConfig | None
    state: DaemonState
    pending_reports: int
    installed_version: str | None
    now: datetime  # server time as this host estimates it
    updater_step: str | None = None  # e.g. "switched: 1.5.0 (run …)" from the updater's state


def describe_run(record: RunRecord, tz: ZoneInfo | None) -> str:
    """`2026-11-30 03:00 — already up to date (1.4.1)`."""
    if record.slot_key is not None:
        when = record.slot_key.replace("T", " ")
    else:
        at = record.at.astimezone(tz) if tz is not None else record.at
        when = f"{at:%Y-%m-%d %H:%M} (manual)"
    words = _OUTCOME_WORDS.get(record.status, record.status)
    if record.status == "succeeded" and record.version:
        words = f"updated to {record.version}"
    elif record.version and record.status != "succeeded":
        words = f"{words} ({record.version})"
    if record.error and record.status not in {"up_to_date"}:
        words = f"{words}: {record.error}"
    if record.run_id:
        words = f"{words} [run {record.run_id}]"
    return f"{when} — {words}"


def _ago(then: datetime, now: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds} seconds ago"
    if seconds < 2 * 3600:
        return f"{seconds // 60} minutes ago"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} hours ago"
    return f"{seconds // 86400} days ago"


def render_status(status: AgentStatus) -> str:
    lines = [f"agent:         {status.agent_id} at {status.control_url}"]
    if status.daemon_pid is None:
        lines.append("daemon:        not running")
    elif status.daemon_pid < 0:
        lines.append("daemon:        running")
    else:
        lines.append(f"daemon:        running (pid {status.daemon_pid})")
    lines.append(f"installed:     {status.installed_version or 'nothing installed yet'}")
    cached = status.cached
    tz: ZoneInfo | None = None
    if cached is None:
        lines.append(
            "config:        never synced (the daemon has not reached the control plane yet)"
        )
    else:
        config = cached.config
        tz = ZoneInfo(config.timezone)
        synced = f"{cached.synced_at:%Y-%m-%d %H:%M:%S} UTC ({_ago(cached.synced_at, status.now)})"
        lines.append(f"config synced: {synced}")
        lines.append(f"clock offset:  {cached.offset_seconds:+.0f} s (the control plane's clock)")
        if config.schedule.enabled:
            times = ", ".join(config.schedule.times)
            lines.append(
                f"schedule:      on, {times} ({config.timezone}); "
                f"catch-up window {config.catch_up_minutes} minutes"
            )
            upcoming = next_slot(config.schedule.times, after=status.now, tz=config.timezone)
            local = upcoming.at.astimezone(tz)
            lines.append(
                f"next slot:     {local:%Y-%m-%d %H:%M %Z} "
                f"({upcoming.at:%Y-%m-%dT%H:%M:%SZ}, in {_until(upcoming.at - status.now)})"
            )
        else:
            lines.append("schedule:      off (updates only when requested in the panel)")
        track = config.track
        if track is not None:
            lines.append(f"follows:       channel {track.channel}, platform {track.platform}")
        release = config.release
        lines.append(f"release:       {release.version if release else 'none published'}")
        brake = config.brake
        brake_text = f"ENGAGED ({brake.reason or 'no reason given'})" if brake.engaged else "off"
        lines.append(f"brake:         {brake_text}")
    claim = status.state.claim
    if claim is None:
        lines.append("in progress:   nothing")
    else:
        target = claim.slot_key or "manual request"
        lines.append(
            f"in progress:   run {claim.run_id} for {target} -> {claim.release_version} "
            f"({claim.phase}, attempt {max(claim.attempts, 1)})"
        )
    if status.updater_step is not None:
        lines.append(f"updater:       {status.updater_step}")
    if status.state.last_consumed is not None:
        lines.append(f"last slot:     {status.state.last_consumed.key.replace('T', ' ')}")
    lines.append(f"outbox:        {status.pending_reports} report(s) waiting to be delivered")
    if status.state.recent_runs:
        lines.append("last runs:")
        for record in reversed(status.state.recent_runs[-10:]):
            lines.append(f"  {describe_run(record, tz)}")
    else:
        lines.append("last runs:     none yet")
    return "\n".join(lines)


def _until(delta: timedelta) -> str:
    minutes = max(0, int(delta.total_seconds()) // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"
