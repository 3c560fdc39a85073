"""What the daemon is doing, in words, and whether its minutes still complete.

Three readers, one source:

- systemd: `STATUS=` ("waiting for 03:00", "downloading 1.5.0 (40 %)", "control plane unreachable
  since 02:58") and the watchdog's verdict — `WATCHDOG=1` is sent only while `alive()`: a minute
  in its worker thread that shows no sign of life for `stuck_after` real seconds, or no minute
  starting for `idle_after`, stops the pings and systemd restarts the daemon;
- the journal: progress lines during long steps (`update.progress`, every few seconds);
- `nachtwacht agent status` and `agent update-now`: the activity file (`activity.json` in the state
  directory), written atomically when what it says changes.

It learns from the daemon's own log lines (an `EventLog` observer), from the tick's start and end,
and from the updater's progress callback — so the daemon and the updater need no knowledge of it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import AwareDatetime, BaseModel, ConfigDict

from agent_daemon.disk.atomic_file import VersionedModelFile
from agent_daemon.host.event_log import EventLog, Level
from ground.contract import AgentConfig
from ground.contract.plain_text import clipped
from ground.limits import MAX_UNREACHABLE_ERROR_LENGTH
from shared_planner import next_slot

__all__ = [
    "ACTIVITY_FILE_NAME",
    "PROGRESS_LOG_SECONDS",
    "Activity",
    "ActivityFile",
    "ActivityRecord",
    "Refusal",
    "sizes",
]

ACTIVITY_FILE_NAME = "activity.json"
ACTIVITY_FORMAT_VERSION = 1
# A progress line (and a new STATUS=) at most this often, in real seconds.
PROGRESS_LOG_SECONDS = 5.0
_KIB = 1024
# What the daemon is doing before it is ready.
_STARTING = "starting"
_MIB = 1024 * _KIB
# What a minute on a host clock the agent cannot follow does (`decision.AgentFacts.clock_off`):
# the next slot by that clock would be another day's.
_CLOCK_OFF = (
    "no scheduled slot is claimed: this host's clock is more than a day off the control "
    "plane's (set it right: NTP)"
)
# The tick results of a minute whose claim is asked for again next minute.
_RETRIED = frozenset({"throttled", "refused", "braked"})


class Refusal(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    at: AwareDatetime
    code: str
    message: str
    slot_key: str | None = None
    run_id: str | None = None


class ActivityRecord(BaseModel):
    """The activity file: what the running daemon is doing and what went wrong lately. A field
    this release does not know (a newer daemon's, switched back from) is passed over, as in the
    other state files: the file only shows, and the running daemon writes it again each minute."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    updated_at: AwareDatetime | None = None
    doing: str = _STARTING
    pid: int | None = None
    # The first minute the control plane could not be reached, and why, until it answers again.
    unreachable_since: AwareDatetime | None = None
    unreachable_error: str | None = None
    # The first minute the control plane answered that it cannot serve (`platform.unavailable`:
    # its database is down), and its words, until a minute ends otherwise: our outage, which
    # `agent status` must not word as this host being offline.
    platform_unavailable_since: AwareDatetime | None = None
    platform_unavailable_error: str | None = None
    # The first minute the control plane refused the agent's credential (revoked, or replaced by
    # a rotation), and its words, until a minute ends otherwise: nothing is updated until the
    # agent is enrolled again, which `agent status` must say even after the daemon stopped.
    credential_refused_since: AwareDatetime | None = None
    credential_refused_error: str | None = None
    # The first minute the config poll's answer could not be used (`config.invalid`: JSON that
    # is no config, a body cut short; a portal's page is the control plane unreached), and why,
    # until a minute ends otherwise: no slot is claimed meanwhile, which `agent status` must say.
    config_unusable_since: AwareDatetime | None = None
    config_unusable_error: str | None = None
    last_refusal: Refusal | None = None
    # How far the daemon's clock found the host's off the control plane's, beyond the bound it
    # follows (`clock.disagrees`, also when no answer measured it: a jump while offline), until
    # they agree again (`clock.agrees`): `agent status` says it at once, as the journal does.
    clock_off_seconds: float | None = None
    # The update being carried out: its run and version, and the last progress shown.
    update_run_id: str | None = None
    update_version: str | None = None
    progress: str | None = None


class ActivityFile(VersionedModelFile[ActivityRecord]):
    def __init__(self, state_dir: Path) -> None:
        super().__init__(
            state_dir / ACTIVITY_FILE_NAME,
            ActivityRecord,
            format_version=ACTIVITY_FORMAT_VERSION,
            what="activity file",
        )


def sizes(done: float, total: float) -> str:
    """`8.4 of 21.0 MB`; a small build in the unit its size needs: `12.0 of 48.0 kB`,
    `300 of 700 bytes` (never `0.0 of 0.0 MB`)."""
    if total < _KIB:
        return f"{done:.0f} of {total:.0f} bytes"
    if total < _MIB:
        return f"{done / _KIB:.1f} of {total / _KIB:.1f} kB"
    return f"{done / _MIB:.1f} of {total / _MIB:.1f} MB"


def _short(text: str) -> str:
    return clipped(text, 160)


def _error(text: str) -> str:
    """An error as `agent status` shows it: whole up to the bound an unreachable slot's error has
    (a proxy's answer, the proxy and what to check run past 200 characters)."""
    return clipped(text, MAX_UNREACHABLE_ERROR_LENGTH)


class Activity:
    """Thread-safe: the tick's worker thread and the updater write, the main thread reads."""

    def __init__(
        self,
        *,
        now: Callable[[], datetime],
        log: EventLog,
        file: ActivityFile | None,
        stuck_after: float,
        idle_after: float,
        monotonic: Callable[[], float] = time.monotonic,
        pid: int | None = None,
    ) -> None:
        self._now = now
        self._log = log
        self._file = file
        self._stuck_after = stuck_after
        self._idle_after = idle_after
        self._monotonic = monotonic
        self._lock = threading.Lock()
        started = monotonic()
        self._tick_running = False
        self._last_sign_of_life = started
        self._last_progress_line = -PROGRESS_LOG_SECONDS
        self._tz: ZoneInfo | None = None
        self._record = ActivityRecord(pid=pid)
        self._written: ActivityRecord | None = None
        log.observe(self.observe)

    # -- what feeds it ------------------------------------------------------------------------

    def ready(self, words: str) -> None:
        """The service is ready, its first minute not yet done: what it says from now on, so
        `STATUS=` never goes back to "starting" after READY."""
        with self._lock:
            if self._record.doing == _STARTING:
                self._record = self._record.model_copy(update={"doing": words})
        self._save()

    def tick_started(self) -> None:
        with self._lock:
            self._tick_running = True
            self._last_sign_of_life = self._monotonic()

    def tick_finished(self, result: str, config: AgentConfig | None) -> None:
        """After a minute: say what the daemon waits for now, from the config it planned with.
        Any minute but an offline one reached the control plane (a 304 logs no line)."""
        with self._lock:
            self._tick_running = False
            self._last_sign_of_life = self._monotonic()
            now = self._now()
            if config is not None:
                self._tz = ZoneInfo(config.timezone)
            if result != "offline":
                self._record = self._record.model_copy(
                    update={"unreachable_since": None, "unreachable_error": None}
                )
            if result != "platform_unavailable":
                self._record = self._record.model_copy(
                    update={"platform_unavailable_since": None, "platform_unavailable_error": None}
                )
            if result != "bad_config":
                self._record = self._record.model_copy(
                    update={"config_unusable_since": None, "config_unusable_error": None}
                )
            if result not in {"credential_refused", "error"}:
                # A minute that failed on the host (`error`) says nothing about the credential.
                self._record = self._record.model_copy(
                    update={"credential_refused_since": None, "credential_refused_error": None}
                )
            self._record = self._record.model_copy(
                update={
                    "doing": _CLOCK_OFF
                    if result == "host_clock"
                    else self._retrying(result) or self._waiting_for(config, now),
                    "update_run_id": None,
                    "update_version": None,
                    "progress": None,
                }
            )
        self._save()

    def observe(self, event: str, _level: Level, fields: dict[str, object]) -> None:
        """The `EventLog` observer: the daemon's lines are the facts this module words. The
        service's own lines (`daemon.*`, written by the main thread) are no sign of a minute's
        life."""
        if event.startswith("daemon."):
            return
        with self._lock:
            self._last_sign_of_life = self._monotonic()
            update = self._learn(event, fields)
            if update:
                self._record = self._record.model_copy(update=update)
        if update:
            self._save()

    def progress(self, step: str, done: float, total: float, *, version: str | None = None) -> None:
        """The updater's progress callback: `download` in bytes, `health` in product seconds of
        `version` (the release, or after a rollback the version it returned to). Every call is a
        sign of life; a line and a new status at most every few seconds."""
        with self._lock:
            moment = self._monotonic()
            self._last_sign_of_life = moment
            if moment - self._last_progress_line < PROGRESS_LOG_SECONDS and done < total:
                return
            self._last_progress_line = moment
            release = self._record.update_version or "the new version"
            checked = version or release
            if step == "download":
                percent = 100 * done / total if total > 0 else 100.0
                words = f"downloading {release} ({percent:.0f} %, {sizes(done, total)})"
                fields: dict[str, object] = {
                    "downloaded_bytes": int(done),
                    "total_bytes": int(total),
                    "percent": round(percent, 1),
                }
            elif step == "health":
                words = f"waiting for {checked} to be healthy ({done:.0f}/{total:.0f} s)"
                if checked != release:
                    words = f"rolled back from {release}: {words}"
                fields = {"waited_seconds": round(done, 1), "deadline_seconds": total}
            else:
                words = f"{step} {checked} ({done:g}/{total:g})"
                fields = {"done": done, "total": total}
            self._record = self._record.model_copy(update={"doing": words, "progress": words})
            run_id = self._record.update_run_id
        fields.update(step=step, run_id=run_id, version=checked)
        self._log.emit("update.progress", level="info", **fields)
        self._save()

    # -- what it tells ------------------------------------------------------------------------

    def alive(self) -> bool:
        """Whether the watchdog may be pinged: a running minute shows signs of life, or an idle
        daemon's next minute has started in time."""
        with self._lock:
            quiet = self._monotonic() - self._last_sign_of_life
            return quiet <= (self._stuck_after if self._tick_running else self._idle_after)

    def status_line(self) -> str:
        """systemd's `STATUS=`: what the daemon is doing, or why the watchdog is no longer fed."""
        with self._lock:
            if self._tick_running:
                quiet = self._monotonic() - self._last_sign_of_life
                if quiet > self._stuck_after:
                    return (
                        f"stuck: the running minute has shown no progress for over "
                        f"{self._stuck_after:.0f} s ({self._record.doing}); watchdog pings stopped"
                    )
            elif self._monotonic() - self._last_sign_of_life > self._idle_after:
                return (
                    f"stuck: no minute has started for over {self._idle_after:.0f} s; "
                    "watchdog pings stopped"
                )
            return self._record.doing

    @property
    def record(self) -> ActivityRecord:
        with self._lock:
            return self._record

    # -- inside -------------------------------------------------------------------------------

    def _local(self, at: datetime) -> str:
        # With its zone: `agent status` shows these words beside times of its own.
        return f"{at.astimezone(self._tz or UTC):%H:%M %Z}"

    def _learn(self, event: str, fields: dict[str, object]) -> dict[str, object]:
        now = self._now()
        error = str(fields.get("error", ""))
        if event in {"control_plane.offline", "claim.offline"}:
            since = self._record.unreachable_since or now
            return {
                "unreachable_since": since,
                "unreachable_error": _error(error),
                "doing": f"control plane unreachable since {self._local(since)}: {_error(error)}",
            }
        if event == "clock.disagrees":
            measured = fields.get("measured_offset_seconds")
            return {
                "clock_off_seconds": float(measured) if isinstance(measured, int | float) else 0.0
            }
        if event == "clock.agrees":
            return {"clock_off_seconds": None}
        if event == "platform.unavailable":
            return {
                "platform_unavailable_since": self._record.platform_unavailable_since or now,
                "platform_unavailable_error": _error(error),
            }
        if event == "config.invalid":
            since = self._record.config_unusable_since or now
            return {
                "config_unusable_since": since,
                "config_unusable_error": _error(error),
                "doing": _unusable_config(self._local(since), _error(error)),
            }
        if event == "control_plane.credential_refused":
            return {
                "credential_refused_since": self._record.credential_refused_since or now,
                "credential_refused_error": _error(error),
                "doing": f"the control plane refuses the credential: {_error(error)}",
            }
        if event in {"config.synced", "config.changed"} or (
            event.startswith(("claim.", "manual.", "slot.")) and event != "claim.offline"
        ):
            update: dict[str, object] = {"unreachable_since": None, "unreachable_error": None}
        else:
            update = {}
        if event in {"claim.refused", "manual.refused", "claim.slot_gone", "claim.braked"}:
            code = str(fields.get("code", "brake" if event == "claim.braked" else "refused"))
            message = str(fields.get("detail", fields.get("reason", "")) or code)
            update["last_refusal"] = Refusal(
                at=now,
                code=code,
                message=_short(message),
                slot_key=_text(fields.get("slot_key")),
                run_id=_text(fields.get("run_id")),
            )
        if event == "update.dispatching":
            version = _text(fields.get("version"))
            update.update(
                {
                    "update_run_id": _text(fields.get("run_id")),
                    "update_version": version,
                    "doing": f"updating to {version}",
                    "progress": None,
                }
            )
        return update

    def _retrying(self, result: str) -> str | None:
        """A minute whose claim was refused for now (a cap, the brake): the same slot is asked
        for again next minute, which "waiting for" the next slot would hide."""
        refusal = self._record.last_refusal
        if result not in _RETRIED or refusal is None:
            return None
        target = (
            f"the {refusal.slot_key[-5:]} slot"
            if refusal.slot_key
            else f"manual run {refusal.run_id}"
            if refusal.run_id
            else "the slot"
        )
        return f"no token for {target} yet ({refusal.code}); asking again next minute"

    def _waiting_for(self, config: AgentConfig | None, now: datetime) -> str:
        record = self._record
        if record.unreachable_since is not None:
            return (
                f"control plane unreachable since {self._local(record.unreachable_since)}: "
                f"{record.unreachable_error or 'no answer'}"
            )
        if record.config_unusable_since is not None:
            return _unusable_config(
                self._local(record.config_unusable_since),
                record.config_unusable_error or "not a config",
            )
        if config is None:
            return "waiting for the first config from the control plane"
        hold = config.hold
        if hold is not None and hold.until > now:
            return f"held until {hold.until.astimezone(self._tz):%Y-%m-%d %H:%M %Z}" + (
                f" ({hold.reason})" if hold.reason else ""
            )
        if config.brake.engaged:
            return f"brake engaged ({config.brake.reason or 'no reason given'}); waiting"
        if not config.schedule.enabled:
            return "schedule off; waiting for a manual update"
        upcoming = next_slot(config.schedule.times, after=now, tz=config.timezone)
        local = upcoming.at.astimezone(self._tz)
        day = "" if local.date() == now.astimezone(self._tz).date() else f" on {local:%Y-%m-%d}"
        return f"waiting for {local:%H:%M %Z}{day}"

    def _save(self) -> None:
        if self._file is None:
            return
        with self._lock:
            record = self._record.model_copy(update={"updated_at": self._now()})
            if self._written is not None and _same(self._written, record):
                return
            self._written = record
        # On a full disk `status` shows an older activity; the daemon's minutes matter more.
        with contextlib.suppress(OSError):
            self._file.save(record)


def _unusable_config(since: str, error: str) -> str:
    return f"the config poll's answer cannot be used since {since}: {error}"


def _same(a: ActivityRecord, b: ActivityRecord) -> bool:
    return a.model_copy(update={"updated_at": None}) == b.model_copy(update={"updated_at": None})


def _text(value: object) -> str | None:
    return None if value is None else str(value)
