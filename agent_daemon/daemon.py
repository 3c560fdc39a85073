"""One minute of the agent: reach, plan, nothing to do, token, dispatch (DESIGN.md rule 8).

Whether a step consumes the slot is decided per step, in this order:

1. reach — sync config. Offline (no answer, timeout, 5xx) consumes nothing: retry next minute.
2. plan — `shared_planner.due_slot` on the server's clock, after the last consumed slot. A manual
   update request in the config skips the planner and the caps.
3. nothing to do — installed is the current release: report `up_to_date`, consume the slot.
4. token — a refusal (cap full, brake) consumes nothing; `slot_consumed`/`window_closed`/
   `not_a_slot` means the slot is gone, so it is consumed locally; a grant is the claim: the slot
   is consumed and the claim persisted before anything else.
5. dispatch — the updater applies the claimed release; the outcome is reported.

Every report goes through the on-disk outbox first, so none is lost to a crash or an outage.
A claim in the state file is finished before anything new is planned: a daemon restarted in the
middle of any step continues from there and never claims or installs the same slot twice.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol

from agent_daemon.daemon_state import (
    ClaimInProgress,
    ConsumedSlot,
    DaemonState,
    RunRecord,
    StateStore,
)
from agent_daemon.errors import (
    AgentError,
    BadServerAnswer,
    ControlPlaneUnreachable,
    CredentialRefused,
    DaemonStateError,
)
from agent_daemon.event_log import EventLog
from agent_daemon.outbox import Outbox
from agent_daemon.reporting import ReportSender
from agent_daemon.sync import (
    CachedConfig,
    ClaimGranted,
    ConfigCache,
    ControlPlaneClient,
    NotModified,
    RemoteConfig,
    ServerClock,
)
from agent_daemon.updater import UpdateOutcome, UpdateRequest
from shared_planner import Slot, due_slot
from signed_release import version_key

__all__ = ["MAX_DISPATCH_ATTEMPTS", "Daemon", "TickResult", "UpdaterPort", "is_current"]

# A claim whose dispatch raised (not a refusal: e.g. a full disk) is retried on later minutes,
# then reported as failed, so one broken update cannot hold the agent forever.
MAX_DISPATCH_ATTEMPTS = 3

TickResult = Literal[
    "offline",
    "credential_refused",
    "bad_config",
    "schedule_off",
    "no_slot",
    "up_to_date",
    "braked",
    "throttled",
    "slot_gone",
    "parked",
    "dispatched",
    "manual_refused",
    "error",
]


class UpdaterPort(Protocol):
    """What the daemon needs of `agent_daemon.updater.Updater`."""

    def apply(self, request: UpdateRequest) -> UpdateOutcome: ...

    def resume(self) -> UpdateOutcome | None: ...

    def installed_version(self) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class _Due:
    slot: Slot
    config: RemoteConfig


class Daemon:
    def __init__(
        self,
        *,
        control: ControlPlaneClient,
        updater: UpdaterPort,
        state_store: StateStore,
        config_cache: ConfigCache,
        outbox: Outbox,
        server_clock: ServerClock,
        log: EventLog,
        stop_requested: Callable[[], bool] = lambda: False,
    ) -> None:
        self._control = control
        self._updater = updater
        self._store = state_store
        self._cache = config_cache
        self._reports = ReportSender(outbox=outbox, control=control, log=log)
        self._clock = server_clock
        self._log = log
        self._stop_requested = stop_requested
        self._cached: CachedConfig | None = None
        self._synced_once = False

    # -- the shell's entry points -------------------------------------------------------------

    def start(self) -> None:
        """Before the first minute: let the updater finish or undo what a crash interrupted.
        Never raises: what cannot be done now is one log line, and the minutes try again."""
        try:
            self._start()
        except (OSError, AgentError) as exc:
            self._log.emit("daemon.start_incomplete", level="error", **_error_fields(exc))

    def _start(self) -> None:
        try:
            self._cached = self._cache.load()
            if self._cached is not None:
                self._clock.learn_offset(timedelta(seconds=self._cached.offset_seconds))
        except DaemonStateError as exc:
            self._log.emit("config_cache.unusable", level="warning", error=str(exc))
        try:
            outcome = self._updater.resume()
        except Exception as exc:
            self._log.emit("update.resume_failed", level="error", **_error_fields(exc))
            return
        if outcome is None:
            return
        state = self._store.load()
        claim = state.claim
        self._log.emit("update.resumed", run_id=outcome.run_id, status=outcome.status)
        if claim is not None and claim.run_id == outcome.run_id:
            self._finish(state, claim, outcome)

    def tick(self) -> TickResult:
        """One minute's work. Never raises: a failure is one log line and a retry next minute."""
        try:
            return self._tick()
        except (OSError, AgentError) as exc:
            self._log.emit("tick.failed", level="error", **_error_fields(exc))
        except Exception as exc:
            # A bug must cost one minute and one line, not the daemon.
            self._log.emit("tick.crashed", level="error", **_error_fields(exc))
        return "error"

    # -- the five steps -----------------------------------------------------------------------

    def _tick(self) -> TickResult:
        state = self._store.load()
        try:
            config = self._reach()
        except ControlPlaneUnreachable as exc:
            self._log.emit("control_plane.offline", level="warning", error=str(exc))
            return "offline"
        except CredentialRefused as exc:
            self._log.emit("control_plane.credential_refused", level="error", error=str(exc))
            return "credential_refused"
        except BadServerAnswer as exc:
            self._log.emit("config.invalid", level="error", error=str(exc))
            return "bad_config"
        self._reports.flush()

        if state.claim is not None:
            return self._dispatch(state, state.claim)
        manual = config.manual_update
        if manual is not None and manual.run_id not in state.handled_manual_runs:
            return self._manual_update(state, manual.run_id)

        if not config.schedule.enabled:
            return "schedule_off"
        slot = due_slot(
            config.schedule.times,
            now=self._clock.now(),
            tz=config.timezone,
            last_consumed=state.last_consumed_at,
            catch_up=timedelta(minutes=config.catch_up_minutes),
        )
        if slot is None:
            return "no_slot"

        installed = self._updater.installed_version()
        if config.release is None or is_current(installed, config.release.version):
            return self._nothing_to_do(state, slot, installed)
        if config.brake.engaged:
            self._log.emit(
                "claim.braked", level="warning", slot_key=slot.key, reason=config.brake.reason
            )
            return "braked"
        if self._stop_requested():
            return "parked"
        return self._claim_slot(state, slot, installed)

    def _reach(self) -> RemoteConfig:
        cached = self._cached
        answer = self._control.fetch_config(etag=None if cached is None else cached.etag)
        if isinstance(answer, NotModified):
            if cached is None:
                raise BadServerAnswer("GET /v1/agent/config: 304 without a cached config to reuse")
            config, raw, etag = cached.config, cached.raw, cached.etag
        else:
            config, raw, etag = answer.config, answer.raw, answer.etag
        if not self._synced_once or cached is None or cached.etag != etag:
            self._log.emit(
                "config.synced" if not self._synced_once else "config.changed",
                etag=etag,
                schedule=list(config.schedule.times) if config.schedule.enabled else "off",
                timezone=config.timezone,
                release=None if config.release is None else config.release.version,
                brake=config.brake.engaged,
                clock_offset_seconds=round(self._clock.offset.total_seconds(), 3),
            )
            self._synced_once = True
        self._cached = CachedConfig(
            config=config,
            raw=raw,
            etag=etag,
            synced_at=self._clock.now(),
            offset_seconds=self._clock.offset.total_seconds(),
        )
        try:
            self._cache.save(self._cached)
        except OSError as exc:
            # The cache is a convenience for offline minutes and `status`; a full disk must not
            # stop an update that needs no disk of its own before the claim.
            self._log.emit("config_cache.write_failed", level="warning", **_error_fields(exc))
        return config

    def _nothing_to_do(self, state: DaemonState, slot: Slot, installed: str | None) -> TickResult:
        self._reports.queue_up_to_date(slot_key=slot.key, installed=installed)
        record = RunRecord(
            at=self._clock.now(),
            trigger="schedule",
            slot_key=slot.key,
            run_id=None,
            status="up_to_date",
            version=installed,
        )
        self._store.save(state.consume(_consumed(slot)).with_run(record))
        self._log.emit("slot.up_to_date", slot_key=slot.key, version=installed)
        self._reports.flush()
        return "up_to_date"

    def _claim_slot(self, state: DaemonState, slot: Slot, installed: str | None) -> TickResult:
        try:
            answer = self._control.claim(
                slot_key=slot.key, manual_run_id=None, from_version=installed
            )
        except ControlPlaneUnreachable as exc:
            self._log.emit("claim.offline", level="warning", slot_key=slot.key, error=str(exc))
            return "offline"
        if not isinstance(answer, ClaimGranted):
            if answer.consumes_slot:
                record = RunRecord(
                    at=self._clock.now(),
                    trigger="schedule",
                    slot_key=slot.key,
                    run_id=None,
                    status=answer.code,
                    version=installed,
                    error=answer.message,
                )
                self._store.save(state.consume(_consumed(slot)).with_run(record))
                self._log.emit(
                    "claim.slot_gone", slot_key=slot.key, code=answer.code, detail=answer.message
                )
                return "slot_gone"
            self._log.emit(
                "claim.refused",
                level="warning",
                slot_key=slot.key,
                code=answer.code,
                retry_after_seconds=answer.retry_after_seconds,
                detail=answer.message,
            )
            return "braked" if answer.code == "brake" else "throttled"
        claim = _claim_from(answer, trigger="schedule", slot_key=slot.key, at=self._clock)
        state = state.consume(_consumed(slot)).model_copy(update={"claim": claim})
        self._store.save(state)
        self._log.emit(
            "claim.granted", slot_key=slot.key, run_id=claim.run_id, version=claim.release_version
        )
        if self._stop_requested():
            self._log.emit("daemon.parked", slot_key=slot.key, run_id=claim.run_id)
            return "parked"
        return self._dispatch(state, claim)

    def _manual_update(self, state: DaemonState, manual_run_id: str) -> TickResult:
        installed = self._updater.installed_version()
        try:
            answer = self._control.claim(
                slot_key=None, manual_run_id=manual_run_id, from_version=installed
            )
        except ControlPlaneUnreachable as exc:
            self._log.emit("claim.offline", level="warning", run_id=manual_run_id, error=str(exc))
            return "offline"
        if not isinstance(answer, ClaimGranted):
            record = RunRecord(
                at=self._clock.now(),
                trigger="manual",
                slot_key=None,
                run_id=manual_run_id,
                status=answer.code,
                error=answer.message,
            )
            self._store.save(state.with_manual_handled(manual_run_id).with_run(record))
            self._log.emit(
                "manual.refused",
                level="warning",
                run_id=manual_run_id,
                code=answer.code,
                detail=answer.message,
            )
            return "manual_refused"
        claim = _claim_from(answer, trigger="manual", slot_key=None, at=self._clock)
        state = state.with_manual_handled(manual_run_id).model_copy(update={"claim": claim})
        self._store.save(state)
        self._log.emit("manual.granted", run_id=claim.run_id, version=claim.release_version)
        if self._stop_requested():
            self._log.emit("daemon.parked", run_id=claim.run_id)
            return "parked"
        return self._dispatch(state, claim)

    def _dispatch(self, state: DaemonState, claim: ClaimInProgress) -> TickResult:
        if self._stop_requested():
            self._log.emit("daemon.parked", slot_key=claim.slot_key, run_id=claim.run_id)
            return "parked"
        request = UpdateRequest(
            run_id=claim.run_id,
            manifest=base64.b64decode(claim.manifest_b64),
            signature=base64.b64decode(claim.signature_b64),
            artifact_url=claim.artifact_url,
        )
        if claim.attempts >= MAX_DISPATCH_ATTEMPTS:
            given_up = UpdateOutcome(
                status="failed",
                version=self._updater.installed_version(),
                error=f"the update could not be carried out in {claim.attempts} attempts",
                run_id=claim.run_id,
            )
            self._finish(state, claim, given_up)
            return "dispatched"
        resuming = claim.phase == "dispatching"
        claim = claim.model_copy(update={"phase": "dispatching", "attempts": claim.attempts + 1})
        state = state.model_copy(update={"claim": claim})
        self._store.save(state)
        self._log.emit(
            "update.dispatching",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=claim.release_version,
            attempt=claim.attempts,
        )
        outcome: UpdateOutcome | None = None
        installed = self._updater.installed_version()
        if not resuming and installed == claim.release_version:
            # A manual request while already on the release: nothing to install, say so.
            outcome = UpdateOutcome(
                status="succeeded", version=installed, error=None, run_id=claim.run_id
            )
        elif resuming:
            # The updater may have been in the middle of this very update when the daemon died.
            resumed = self._updater.resume()
            if resumed is not None and resumed.run_id == claim.run_id:
                outcome = resumed
            elif installed == claim.release_version:
                outcome = UpdateOutcome(
                    status="succeeded",
                    version=claim.release_version,
                    error=None,
                    run_id=claim.run_id,
                )
        if outcome is None:
            outcome = self._updater.apply(request)
        self._finish(state, claim, outcome)
        return "dispatched"

    def _finish(self, state: DaemonState, claim: ClaimInProgress, outcome: UpdateOutcome) -> None:
        self._reports.queue_outcome(slot_key=claim.slot_key, outcome=outcome)
        record = RunRecord(
            at=self._clock.now(),
            trigger=claim.trigger,
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            status=outcome.status,
            version=outcome.version,
            error=outcome.error,
        )
        self._store.save(state.model_copy(update={"claim": None}).with_run(record))
        self._log.emit(
            f"update.{outcome.status}",
            level="info" if outcome.status == "succeeded" else "warning",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=outcome.version,
            error=outcome.error,
        )
        self._reports.flush()


def is_current(installed: str | None, release: str) -> bool:
    """Nothing to do: installed is the release, or newer (a downgrade is never planned)."""
    if installed is None:
        return False
    if installed == release:
        return True
    try:
        return version_key(installed) >= version_key(release)
    except ValueError:
        return False


def _consumed(slot: Slot) -> ConsumedSlot:
    return ConsumedSlot(key=slot.key, at=slot.at)


def _claim_from(
    answer: ClaimGranted,
    *,
    trigger: Literal["schedule", "manual"],
    slot_key: str | None,
    at: ServerClock,
) -> ClaimInProgress:
    return ClaimInProgress(
        run_id=answer.run_id,
        trigger=trigger,
        slot_key=slot_key,
        release_version=answer.release.version,
        manifest_b64=answer.release.manifest_b64,
        signature_b64=answer.release.signature_b64,
        artifact_url=answer.artifact_url,
        claimed_at=at.now(),
    )


def _error_fields(exc: BaseException) -> dict[str, object]:
    return {"error_type": type(exc).__name__, "error": str(exc)}
