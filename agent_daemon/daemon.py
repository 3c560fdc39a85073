"""One minute of the agent, carried out: the executor of `agent_daemon.decision.decide`.

`decide` holds DESIGN.md rule 8 (which step consumes the slot); this module does what each of its
actions asks — the config sync, the claim, the updater, the reports through the outbox, the state
saves and the log lines — and feeds what it found back, until the action is final.

The clock is read once per minute, right after the reach: that answer is what teaches the
`ServerClock` the control plane's time, so the instant a slot is planned on is the one recorded.

Every report goes through the on-disk outbox first, so none is lost to a crash or an outage. A
claim in the state file is finished before anything new is planned: a daemon restarted in the
middle of any step continues from there and never claims or installs the same slot twice.

Under faults (issue 13; docs/agent_daemon.md "Faults"), a claimed update finishes inside its
window or not at all:

* immediately before the switch the updater asks the control plane to confirm the run's token
  (`POST confirm_path`); only a `SwapPermit` lets it switch;
* a failure that may pass (the platform unavailable, a cut download, no confirmation, a full disk)
  keeps the claim and is tried again next minute, resuming the partial download, until the
  window (`claim_window`) closes; then the run ends `failed` with the last such reason;
* a claim found after its window (the daemon was down) is never switched: the updater settles it
  (`Updater.settle`) and the run ends with reason `interrupted`;
* the claim's attempts and the final report live in memory too, so a full state directory can
  neither hide the report nor lift the attempt bound.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from agent_daemon import wire
from agent_daemon.claim_window import claim_deadline, claim_is_open, end_reason
from agent_daemon.config_cache import CachedConfig, ConfigCache
from agent_daemon.control_plane_client import ControlPlaneClient, NotModified
from agent_daemon.daemon_state import (
    ClaimInProgress,
    ConsumedSlot,
    DaemonState,
    RunRecord,
    StateStore,
)
from agent_daemon.decision import (
    Action,
    AgentFacts,
    Answer,
    ClaimAnswer,
    ClaimManual,
    ClaimRequestAction,
    ClaimSlot,
    ConfigRejected,
    CredentialRejected,
    EndManual,
    GiveUpSlot,
    Granted,
    NothingToDo,
    Refused,
    ResumeClaim,
    StartUpdate,
    TickResult,
    Unreachable,
    Wait,
    decide,
    is_current,
)
from agent_daemon.errors import (
    AgentError,
    BadServerAnswer,
    ControlPlaneUnreachable,
    CredentialRefused,
    DaemonStateError,
)
from agent_daemon.event_log import EventLog, Level
from agent_daemon.outbox import Outbox
from agent_daemon.reporting import ReportSender
from agent_daemon.server_clock import MAX_SERVER_CLOCK_OFFSET, ServerClock
from agent_daemon.swap_confirmation import SwapConfirmation
from agent_daemon.updater import UpdateOutcome, UpdateRequest
from agent_daemon.updater.swap_gate import ConfirmSwap
from ground.contract import (
    AgentConfig,
    ClaimGrant,
    ClaimRequest,
    OutcomeReason,
    RefusalCode,
    format_instant,
)
from ground.limits import DEFAULT_CATCH_UP_MINUTES
from shared_planner import Slot

__all__ = ["MAX_DISPATCH_ATTEMPTS", "Daemon", "TickResult", "UpdaterPort", "is_current"]

# A claim whose dispatch raised or was interrupted (a crash, a full disk) is retried on later
# minutes, then reported as failed, so one broken update cannot hold the agent forever. A failure
# that says the platform was unavailable or the download was cut does not count: those are tried
# again until the window closes.
MAX_DISPATCH_ATTEMPTS = 3
# While host and server disagree beyond the offset bound, the warning is repeated this often.
CLOCK_WARNING_INTERVAL = timedelta(hours=1)

# The log line of a minute whose reach failed, by reason; a refused or unanswered claim is logged
# with its code or error instead (see `_wait`).
_WAIT_EVENTS: dict[str, tuple[str, Level]] = {
    "offline": ("control_plane.offline", "warning"),
    "credential_refused": ("control_plane.credential_refused", "error"),
    "bad_config": ("config.invalid", "error"),
}

# What a slot-consuming refusal means, in words for the journal (`claim.slot_gone`).
_SLOT_GONE_WORDS: dict[RefusalCode, str] = {
    RefusalCode.RELEASE_ROLLED_BACK: "this host rolled the offered release back: nothing to do "
    "until a newer release is published or an operator asks for a retry",
    RefusalCode.HELD: "the agent is held: this slot is skipped",
    RefusalCode.WINDOW_CLOSED: "the slot's window had closed on the control plane's clock",
    RefusalCode.SLOT_CONSUMED: "the control plane had already recorded this slot",
    RefusalCode.NOT_A_SLOT: "the control plane does not know this slot in the schedule",
}
# The facts of a minute whose only use is the log line of an unreachable control plane.
_NO_FACTS = AgentFacts(last_consumed_at=None, installed_version=None)
# Failures that may pass and do not count against MAX_DISPATCH_ATTEMPTS (a full disk does).
_UNCOUNTED = frozenset(
    {
        OutcomeReason.PLATFORM_UNAVAILABLE,
        OutcomeReason.DOWNLOAD_FAILED,
    }
)


@dataclass(frozen=True, kw_only=True)
class _Reached:
    """What the reach brought: a fresh config, or the cached one confirmed by a 304."""

    config: AgentConfig
    raw: dict[str, Any]
    etag: str | None


class UpdaterPort(Protocol):
    """What the daemon needs of `agent_daemon.updater.Updater`."""

    def apply(self, request: UpdateRequest) -> UpdateOutcome: ...

    def settle(self, reason: OutcomeReason) -> UpdateOutcome | None: ...

    def installed_version(self) -> str | None: ...


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
        self._clock_warned_at: datetime | None = None
        # What a full or read-only state directory must not lose: the claim as last known (its
        # attempts, its last failure) and the runs that ended though their end was not saved.
        self._claims_in_memory: dict[str, ClaimInProgress] = {}
        self._ended_runs: set[str] = set()

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
                self._clock.learn_offset_seconds(self._cached.offset_seconds)
        except DaemonStateError as exc:
            self._log.emit("config_cache.unusable", level="warning", error=str(exc))
        state = self._store.load()
        claim = self._live_claim(state)
        now = self._clock.now()
        if claim is None:
            self._settle_orphan(state)
        elif not claim_is_open(claim, now):
            # Stopped or killed inside the update, started after its window: never switched now.
            self._end_after_window(state, claim, now)
        else:
            # Inside its window the first minute carries it on, confirming before any switch.
            self._log.emit(
                "update.pending",
                slot_key=claim.slot_key,
                run_id=claim.run_id,
                window_closes_at=format_instant(claim_deadline(claim)),
            )

    def _settle_updater(self, reason: OutcomeReason) -> UpdateOutcome | None:
        """Let the updater end an update no open claim stands behind, without a new switch; None
        when nothing was in progress or it cannot be done this minute."""
        try:
            outcome = self._updater.settle(reason)
        except Exception as exc:
            self._log.emit("update.resume_failed", level="error", **_error_fields(exc))
            return None
        if outcome is not None:
            self._log.emit(
                "update.resumed",
                run_id=outcome.run_id,
                status=outcome.status,
                reason=outcome.reason,
            )
        return outcome

    def _settle_orphan(self, state: DaemonState) -> None:
        """An update the updater still holds with no claim of ours behind it (its claim was given
        up or ended, or the daemon restarted in between): end it, never switching, so it never
        blocks the next release; reported unless its run already was."""
        orphan = self._settle_updater(OutcomeReason.INTERRUPTED)
        if orphan is None:
            return
        reported = {run.run_id for run in state.recent_runs} | self._ended_runs
        if orphan.run_id not in reported:
            self._reports.queue_outcome(slot_key=None, outcome=orphan)
        self._reports.flush()

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

    # -- the minute: decide, do, feed back ----------------------------------------------------

    def _tick(self) -> TickResult:
        state = self._store.load()
        claim = self._live_claim(state)
        state = state.model_copy(update={"claim": claim})
        reached = self._reach()
        now = self._clock.now()
        self._check_clock(now)
        if claim is None:
            self._settle_orphan(state)
        config: AgentConfig | None = None
        answer: Answer = None
        if isinstance(reached, _Reached):
            self._remember(reached, now)
            self._reports.flush()
            config = reached.config
        else:
            answer = reached
            if claim is not None and isinstance(reached, Unreachable):
                # The claim already holds the slot: carry it on while the control plane is down
                # (its partial download resumes as soon as it can, and its window still ends it).
                waited = decide(_NO_FACTS, None, reached, now)
                assert isinstance(waited, Wait), "an unreachable control plane is a wait"
                self._wait(waited)
                return self._dispatch(state, claim, now)
        facts = AgentFacts(
            last_consumed_at=state.last_consumed_at,
            installed_version=self._updater.installed_version(),
            claim_in_progress=state.claim is not None,
            handled_manual_runs=frozenset(state.handled_manual_runs),
        )
        action = decide(facts, config, answer, now)
        while isinstance(action, ClaimSlot | ClaimManual):
            if self._stop_requested():
                return "parked"
            action = decide(facts, config, self._claim(action), now)
        return self._carry_out(action, state, now, config)

    def _carry_out(
        self, action: Action, state: DaemonState, now: datetime, config: AgentConfig | None
    ) -> TickResult:
        if isinstance(action, Wait):
            return self._wait(action)
        if isinstance(action, ResumeClaim):
            assert state.claim is not None, "decide resumes only a claim the state holds"
            return self._dispatch(state, state.claim, now)
        if isinstance(action, NothingToDo):
            return self._nothing_to_do(state, action, now)
        if isinstance(action, GiveUpSlot):
            return self._give_up_slot(state, action, now)
        if isinstance(action, EndManual):
            return self._end_manual(state, action, now)
        if isinstance(action, StartUpdate):
            return self._start_update(state, action, now, config)
        raise AssertionError(f"decide returned {action!r}, which is not final")

    def _reach(self) -> _Reached | Unreachable | CredentialRejected | ConfigRejected:
        """Step 1: the config, fresh or confirmed unchanged (304), or why there is none."""
        cached = self._cached
        try:
            answer = self._control.fetch_config(etag=None if cached is None else cached.etag)
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
            return _Reached(config=cached.config, raw=cached.raw, etag=cached.etag)
        return _Reached(config=answer.config, raw=answer.raw, etag=answer.etag)

    def _check_clock(self, now: datetime) -> None:
        """Say loudly when the host's clock and the control plane's disagree beyond the bound the
        offset is kept within: plans then run on the host clock plus the bound, not on the
        server's word."""
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
            "offset is kept at the bound — fix the host's clock (NTP) or the control plane's",
        )

    def _remember(self, reached: _Reached, now: datetime) -> None:
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
            self._log.emit("config_cache.write_failed", level="warning", **_error_fields(exc))

    def _claim(self, action: ClaimRequestAction) -> ClaimAnswer:
        if isinstance(action, ClaimSlot):
            request = ClaimRequest(slot_key=action.slot.key, from_version=action.from_version)
        else:
            request = ClaimRequest(
                manual_run_id=action.run_id,  # type: ignore[arg-type]  # pydantic parses the UUID
                from_version=action.from_version,
            )
        try:
            answer = self._control.claim(request)
        except ControlPlaneUnreachable as exc:
            return Unreachable(error=str(exc), request=action, platform=exc.status is not None)
        if isinstance(answer, ClaimGrant):
            return Granted(request=action, grant=answer)
        return Refused(request=action, detail=answer)

    # -- the final actions --------------------------------------------------------------------

    def _wait(self, action: Wait) -> TickResult:
        about = {} if action.request is None else _about(action.request)
        if action.reason == "platform_unavailable":
            # The control plane answered that it cannot serve (its database is down): our
            # outage, not this host being offline, not a refusal and not a full round.
            self._log.emit(
                "platform.unavailable",
                level="warning",
                **about,
                step="claim" if action.request is not None else "config",
                error=action.error,
            )
        elif action.detail is not None:
            self._log.emit(
                "claim.refused",
                level="warning",
                **about,
                code=action.detail.code,
                retry_after_seconds=action.detail.retry_after_seconds,
                detail=action.detail.message,
            )
        elif action.request is not None:
            self._log.emit("claim.offline", level="warning", **about, error=action.error)
        elif action.reason == "braked":
            slot_key = None if action.slot is None else action.slot.key
            self._log.emit("claim.braked", level="warning", slot_key=slot_key, reason=action.error)
        elif action.reason in _WAIT_EVENTS and action.error is not None:
            event, level = _WAIT_EVENTS[action.reason]
            self._log.emit(event, level=level, error=action.error)
        return action.reason

    def _nothing_to_do(self, state: DaemonState, action: NothingToDo, now: datetime) -> TickResult:
        slot = action.slot
        self._reports.queue_up_to_date(slot_key=slot.key, installed=action.version)
        record = RunRecord(
            at=now,
            trigger="schedule",
            slot_key=slot.key,
            run_id=None,
            status="up_to_date",
            version=action.version,
        )
        self._store.save(state.consume(_consumed(slot)).with_run(record))
        self._log.emit("slot.up_to_date", slot_key=slot.key, version=action.version)
        self._reports.flush()
        return "up_to_date"

    def _give_up_slot(self, state: DaemonState, action: GiveUpSlot, now: datetime) -> TickResult:
        slot = action.slot
        record = RunRecord(
            at=now,
            trigger="schedule",
            slot_key=slot.key,
            run_id=None,
            status=action.refusal.value,
            version=action.from_version,
            error=action.detail.message,
        )
        self._save(state.consume(_consumed(slot)).with_run(record))
        self._log.emit(
            "claim.slot_gone",
            slot_key=slot.key,
            code=action.refusal.value,
            meaning=_SLOT_GONE_WORDS.get(action.refusal, "the control plane consumed the slot"),
            detail=action.detail.message,
        )
        return "slot_gone"

    def _end_manual(self, state: DaemonState, action: EndManual, now: datetime) -> TickResult:
        record = RunRecord(
            at=now,
            trigger="manual",
            slot_key=None,
            run_id=action.run_id,
            status=action.detail.code,
            error=action.detail.message,
        )
        self._store.save(state.with_manual_handled(action.run_id).with_run(record))
        self._log.emit(
            "manual.refused",
            level="warning",
            run_id=action.run_id,
            code=action.detail.code,
            detail=action.detail.message,
        )
        return "manual_refused"

    def _start_update(
        self,
        state: DaemonState,
        action: StartUpdate,
        now: datetime,
        config: AgentConfig | None,
    ) -> TickResult:
        request, grant = action.request, action.grant
        release = grant.release
        window_closes_at = None
        if isinstance(request, ClaimSlot):
            catch_up = config.catch_up_minutes if config is not None else DEFAULT_CATCH_UP_MINUTES
            window_closes_at = request.slot.at + timedelta(minutes=catch_up)
        claim = ClaimInProgress(
            run_id=str(grant.run_id),
            trigger="schedule" if isinstance(request, ClaimSlot) else "manual",
            slot_key=request.slot.key if isinstance(request, ClaimSlot) else None,
            release_version=release.version,
            manifest_b64=release.manifest_b64,
            signature_b64=release.signature_b64,
            artifact_url=self._control.absolute_url(release.artifact_url),
            claimed_at=now,
            window_closes_at=window_closes_at,
            token_expires_at=grant.token.expires_at,
        )
        if isinstance(request, ClaimSlot):
            state = state.consume(_consumed(request.slot))
            event = "claim.granted"
        else:
            state = state.with_manual_handled(request.run_id)
            event = "manual.granted"
        # The grant is the claim: it is on disk, with the consumed slot, before anything else.
        state = state.model_copy(update={"claim": claim})
        self._save(state)
        self._log.emit(
            event,
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=release.version,
            window_closes_at=format_instant(claim_deadline(claim)),
        )
        if self._stop_requested():
            self._log.emit("daemon.parked", slot_key=claim.slot_key, run_id=claim.run_id)
            return "parked"
        return self._dispatch(state, claim, now)

    def _dispatch(self, state: DaemonState, claim: ClaimInProgress, now: datetime) -> TickResult:
        if self._stop_requested():
            self._log.emit("daemon.parked", slot_key=claim.slot_key, run_id=claim.run_id)
            return "parked"
        if not claim_is_open(claim, now):
            self._end_after_window(state, claim, now)
            return "dispatched"
        try:
            request = UpdateRequest(
                run_id=claim.run_id,
                manifest=_decode(claim.manifest_b64, "manifest_b64"),
                signature=_decode(claim.signature_b64, "signature_b64"),
                artifact_url=claim.artifact_url,
                confirm_swap=self._confirmer(claim),
            )
        except ValueError as exc:
            # The grant is the claim, so this is an update that failed, reported like any other.
            unusable = UpdateOutcome(
                status="failed",
                version=self._updater.installed_version(),
                error=f"release refused: {exc}",
                run_id=claim.run_id,
                reason=OutcomeReason.VERIFICATION_FAILED,
            )
            self._finish(state, claim, unusable, now=now)
            return "dispatched"
        if claim.attempts >= MAX_DISPATCH_ATTEMPTS:
            self._end_unfinished(
                state,
                claim,
                now,
                why=f"the update could not be carried out in {claim.attempts} attempts",
            )
            return "dispatched"
        resuming = claim.phase == "dispatching"
        claim = claim.model_copy(update={"phase": "dispatching", "attempts": claim.attempts + 1})
        state = state.model_copy(update={"claim": claim})
        self._save(state)
        self._log.emit(
            "update.dispatching",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=claim.release_version,
            attempt=claim.attempts,
        )
        installed = self._updater.installed_version()
        if not resuming and installed == claim.release_version:
            # A manual request while already on the release: nothing to install, say so.
            outcome = UpdateOutcome(
                status="succeeded", version=installed, error=None, run_id=claim.run_id
            )
        else:
            # Also when resuming: the updater carries on the step it recorded for this run.
            outcome = self._updater.apply(request)
        if outcome.status == "failed" and outcome.retry:
            later = self._clock.now()
            counted = outcome.reason not in _UNCOUNTED
            if claim_is_open(claim, later) and not (
                counted and claim.attempts >= MAX_DISPATCH_ATTEMPTS
            ):
                return self._retry_later(state, claim, outcome, counted=counted)
        self._finish(state, claim, outcome, now=now)
        return "dispatched"

    def _retry_later(
        self, state: DaemonState, claim: ClaimInProgress, outcome: UpdateOutcome, *, counted: bool
    ) -> TickResult:
        """A failure that may pass, inside the window: keep the claim (and the partial download
        or staged build), try again next minute."""
        claim = claim.model_copy(
            update={
                "attempts": claim.attempts if counted else claim.attempts - 1,
                "last_reason": outcome.reason,
                "last_error": outcome.error,
            }
        )
        self._save(state.model_copy(update={"claim": claim}))
        self._log.emit(
            "update.retrying",
            level="warning",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            reason=outcome.reason,
            error=outcome.error,
            window_closes_at=format_instant(claim_deadline(claim)),
        )
        return "retrying"

    def _end_after_window(self, state: DaemonState, claim: ClaimInProgress, now: datetime) -> None:
        """The run's window (or token) ended before it finished: it is never switched now."""
        deadline = claim_deadline(claim)
        self._log.emit(
            "update.window_closed",
            level="warning",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            window_closes_at=format_instant(deadline),
            reason=end_reason(claim),
        )
        self._end_unfinished(
            state,
            claim,
            now,
            why=f"the window closed at {format_instant(deadline)} before the update could finish",
        )

    def _end_unfinished(
        self, state: DaemonState, claim: ClaimInProgress, now: datetime, *, why: str
    ) -> None:
        """End a run that will not be carried on: an update the updater holds for it ends without
        a switch — or, when the switch had already happened inside the window, is finished as
        before (health check, roll back) and reported as such."""
        reason = end_reason(claim)
        settled = self._settle_updater(reason)
        if settled is not None and settled.run_id == claim.run_id:
            outcome = settled
        else:
            if settled is not None:
                self._reports.queue_outcome(slot_key=None, outcome=settled)
            outcome = UpdateOutcome(
                status="failed",
                version=self._updater.installed_version(),
                error=f"{why} ({reason.value})"
                + (f"; last failure: {claim.last_error}" if claim.last_error else "")
                + "; nothing was switched",
                run_id=claim.run_id,
                reason=reason,
            )
        self._finish(state, claim, outcome, now=now)

    def _confirmer(self, claim: ClaimInProgress) -> ConfirmSwap:
        """The question the updater asks right before it switches (`swap_confirmation`)."""
        return SwapConfirmation(
            control=self._control, clock=self._clock, log=self._log, claim=claim
        )

    def _finish(
        self, state: DaemonState, claim: ClaimInProgress, outcome: UpdateOutcome, *, now: datetime
    ) -> None:
        self._reports.queue_outcome(slot_key=claim.slot_key, outcome=outcome)
        record = RunRecord(
            at=now,
            trigger=claim.trigger,
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            status=outcome.status,
            version=outcome.version,
            error=outcome.error,
            reason=None if outcome.reason is None else outcome.reason.value,
        )
        self._ended_runs.add(claim.run_id)
        self._claims_in_memory.pop(claim.run_id, None)
        self._save(state.model_copy(update={"claim": None}).with_run(record))
        self._log.emit(
            f"update.{outcome.status}",
            level="info" if outcome.status == "succeeded" else "warning",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=outcome.version,
            error=outcome.error,
            reason=outcome.reason,
            switched_at=_instant_or_none(outcome.switched_at),
        )
        self._reports.flush()

    # -- the state file, when the disk may be full ----------------------------------------------

    def _save(self, state: DaemonState) -> None:
        """Save the state; when the disk refuses, keep the claim in memory (its attempts and last
        failure still bound it) and carry on — the next save tries again."""
        claim = state.claim
        if claim is not None:
            self._claims_in_memory[claim.run_id] = claim
        try:
            self._store.save(state)
        except OSError as exc:
            self._log.emit(
                "state.write_failed",
                level="error",
                run_id=None if claim is None else claim.run_id,
                error=f"{exc.filename or 'daemon state'}: {exc.strerror or exc}",
                detail="the claim is kept in memory; reports are sent directly",
            )

    def _live_claim(self, state: DaemonState) -> ClaimInProgress | None:
        """The claim to carry on: the state file's, unless its run already ended in memory (its
        end could not be saved), with what memory knows beyond the file (more attempts)."""
        claim = state.claim
        if claim is None:
            return None
        if claim.run_id in self._ended_runs:
            self._save(state.model_copy(update={"claim": None}))
            return None
        remembered = self._claims_in_memory.get(claim.run_id)
        if remembered is not None and remembered.attempts > claim.attempts:
            return remembered
        return claim


def _instant_or_none(at: datetime | None) -> str | None:
    return None if at is None else format_instant(at)


def _decode(text: str, field: str) -> bytes:
    """Strict base64 of the control plane's answer (untrusted): `ValueError` naming the field."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{field}: {text[:40]!r}… is not valid base64 ({exc})") from exc


def _consumed(slot: Slot) -> ConsumedSlot:
    return ConsumedSlot(key=slot.key, at=slot.at)


def _about(action: ClaimRequestAction) -> dict[str, str]:
    """The log fields naming what a claim was for."""
    if isinstance(action, ClaimSlot):
        return {"slot_key": action.slot.key}
    return {"run_id": action.run_id}


def _error_fields(exc: BaseException) -> dict[str, object]:
    return {"error_type": type(exc).__name__, "error": str(exc)}
