"""What the person on the host asks for: `nachtwacht agent hold | release-hold | update-now`.

`hold --until` reads a date or a time in the platform's zone (the zone the schedule is in, from
the cached config): `2026-12-05` is that day's 00:00, `2026-12-05 06:00` that wall time, `06:00`
its next occurrence; an instant with an offset (`…Z`, `…+01:00`) is taken as written. Wall times
go through the planner's one daylight-saving rule (`resolve_wall_time`).

`update-now` asks the control plane for a manual update and follows it to its outcome: the
running daemon learns of the run from its next config, claims and applies it; this command reads
the daemon's state file (the outcome) and activity file (the progress) until the run ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from agent_daemon.disk.daemon_state import RunRecord, StateStore
from agent_daemon.errors import AgentError, ConfigError, DaemonStateError
from agent_daemon.host.activity import ActivityFile
from ground.contract.messages import MAX_HOLD_REASON_LENGTH
from ground.contract.plain_text import clipped, first_bidi_control, first_control_character
from ground.instants import DAY_TEXT, parse_written_time
from ground.limits import FIRST_YEAR, LAST_YEAR
from shared_planner import resolve_wall_time
from shared_planner.errors import InvalidPlanningInput

__all__ = [
    "FollowResult",
    "UsageProblem",
    "checked_reason",
    "follow_manual_update",
    "parse_until",
]

# ASCII digits only (`\d` would take Arabic-Indic digits too); an instant with its offset is
# `parse_written_time`'s form, never whatever `fromisoformat` reads (a week date, say).
_DATE = re.compile(DAY_TEXT)
_TIME = re.compile(r"[0-9]{1,2}:[0-9]{2}")
_DATE_TIME = re.compile(rf"({DAY_TEXT})[T ]([0-9]{{1,2}}:[0-9]{{2}})")
_EXPECTED = "YYYY-MM-DD, 'YYYY-MM-DD HH:MM', HH:MM, or an instant with an offset such as …Z"
# The outcomes a manual run ends with (the daemon's `RunRecord.status`): success, and the rest.
_SUCCEEDED = "succeeded"


class UsageProblem(ConfigError):
    """A value on the command line that cannot be used, named with what was expected."""


def parse_until(text: str, *, now: datetime, zone: ZoneInfo) -> datetime:
    """`--until` as an aware UTC instant after `now`, or `UsageProblem` naming the value."""
    value = text.strip()
    try:
        if _DATE.fullmatch(value):
            at = resolve_wall_time(date.fromisoformat(value), time(0, 0), zone)
        elif match := _DATE_TIME.fullmatch(value):
            day, wall = match.groups()
            at = resolve_wall_time(date.fromisoformat(day), _wall(wall), zone)
        elif _TIME.fullmatch(value):
            wall = _wall(value)
            today = now.astimezone(zone).date()
            at = resolve_wall_time(today, wall, zone)
            if at <= now:
                at = resolve_wall_time(today + timedelta(days=1), wall, zone)
        else:
            at = parse_written_time(value)
    except InvalidPlanningInput as exc:
        # A date the planner does not place (its years: `ground.limits`).
        raise UsageProblem(
            f"--until: {text!r} is out of range (expected a date in the years {FIRST_YEAR} to "
            f"{LAST_YEAR})"
        ) from exc
    except ValueError as exc:
        raise UsageProblem(f"--until: {text!r} is not a date or time ({_EXPECTED})") from exc
    except OverflowError as exc:
        # An offset that carries the instant past year 9999 or before year 1 in UTC.
        raise UsageProblem(
            f"--until: {text!r} is out of range (expected a time within the years 1 to 9999 UTC)"
        ) from exc
    if at <= now:
        shown = now.astimezone(zone)
        raise UsageProblem(
            f"--until: {text!r} is not in the future (it is now {shown:%Y-%m-%d %H:%M} {zone})"
        )
    return at


def checked_reason(reason: str | None) -> str | None:
    """`--reason` as the control plane takes it (`HoldRequest`: plain text, at most
    `MAX_HOLD_REASON_LENGTH` characters), or `UsageProblem` naming the value — before anything is
    asked, so a reason that cannot be sent never reaches the network."""
    if reason is None:
        return None
    quoted = repr(clipped(reason, 40))
    if len(reason) > MAX_HOLD_REASON_LENGTH:
        raise UsageProblem(f"--reason: {quoted} is longer than {MAX_HOLD_REASON_LENGTH} characters")
    if any(0xD800 <= ord(character) <= 0xDFFF for character in reason):
        raise UsageProblem(f"--reason: {quoted} is not UTF-8 text (expected plain text)")
    control = first_control_character(reason)
    if control is not None:
        raise UsageProblem(
            f"--reason: {quoted} contains the control character U+{ord(control):04X} "
            "(expected plain text)"
        )
    bidi = first_bidi_control(reason)
    if bidi is not None:
        raise UsageProblem(
            f"--reason: {quoted} contains the bidirectional control U+{ord(bidi):04X} "
            "(expected plain text)"
        )
    return reason


def _wall(text: str) -> time:
    hours, minutes = (int(part) for part in text.split(":"))
    return time(hours, minutes)  # ValueError for 25:00 or 03:61, worded by the caller


@dataclass(frozen=True, kw_only=True)
class FollowResult:
    record: RunRecord | None  # None when the wait ended without an outcome

    @property
    def succeeded(self) -> bool:
        return self.record is not None and self.record.status == _SUCCEEDED


def follow_manual_update(
    run_id: str,
    *,
    state: StateStore,
    activity: ActivityFile,
    daemon_running: Callable[[], bool],
    say: Callable[[str], None],
    sleep: Callable[[float], None],
    poll_seconds: float,
    timeout_seconds: float,
    monotonic: Callable[[], float],
) -> FollowResult:
    """Poll the daemon's files until `run_id` has an outcome, saying each new progress line.

    Ends early, without an outcome, when the daemon stops running (the run stays filed: the next
    daemon picks it up) or after `timeout_seconds` (real)."""
    deadline = monotonic() + timeout_seconds
    said = ""
    seen_running = False
    while True:
        record = _outcome_of(run_id, state)
        if record is not None:
            return FollowResult(record=record)
        running = daemon_running()
        if not running and not seen_running:
            say(
                "the daemon is not running: the request stays filed, and the daemon takes it up "
                "at its first minute once it runs (systemctl start nachtwacht-agent)"
            )
            return FollowResult(record=None)
        seen_running = True
        words = _progress_words(run_id, activity)
        if words and words != said:
            say(words)
            said = words
        if not running:
            say("the daemon stopped before the update ended; the request stays filed")
            return FollowResult(record=None)
        if monotonic() >= deadline:
            say(f"no outcome within {timeout_seconds:g} s; the update goes on without this command")
            return FollowResult(record=None)
        sleep(poll_seconds)


def _outcome_of(run_id: str, state: StateStore) -> RunRecord | None:
    try:
        loaded = state.load()
    except DaemonStateError:
        return None  # being replaced right now, or broken: the next poll says
    return next((r for r in reversed(loaded.recent_runs) if r.run_id == run_id), None)


def _progress_words(run_id: str, activity: ActivityFile) -> str:
    try:
        record = activity.load()
    except (DaemonStateError, AgentError, OSError):
        return ""
    if record.update_run_id == run_id:
        return record.progress or record.doing
    refusal = record.last_refusal
    if refusal is not None and refusal.run_id == run_id:
        return f"refused: {refusal.code} ({refusal.message})"
    return "waiting for the daemon to pick up the request (at its next minute)"
