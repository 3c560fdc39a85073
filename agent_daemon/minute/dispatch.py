"""Step 5 of the minute, the dispatch: a granted claim carried through the updater to its report.

`Dispatcher` hands a claim to the updater (`UpdaterPort.apply`), retries a failure that may pass,
and ends every run with an outcome that is recorded in the state file and reported through the
outbox. It also settles what the updater holds with no open claim behind it — at start and at
every minute with no claim — so nothing can leave the updater unable to take the next release.

Under faults (docs/agent_daemon.md "Faults"), a claimed update finishes inside its
window or not at all:

* immediately before the switch the updater asks the control plane to confirm the run's token
  (`POST confirm_path`); only a `SwapPermit` lets it switch;
* a failure that may pass (the platform unavailable, a cut download, no confirmation, a full disk)
  keeps the claim and is tried again next minute, resuming the partial download, until the
  window (`claim_window`) closes; then the run ends `failed` with the last such reason;
* a claim found after its window (the daemon was down) is never switched: the updater settles it
  (`Updater.settle`) and the run ends with reason `interrupted`;
* the claim's attempts and the final report live in memory too (`claim_keeper`), so a full state
  directory can neither hide the report nor lift the attempt bound.

A claim whose signed manifest names the `updater` product is a self-update of nachtwacht's own
agent: it goes to the `SelfUpdatePort` (`self_update.seam`) instead, which verifies it as
the updater. Which path takes it is read from the manifest before its signature is checked, and
only for the routing: each path verifies the signature and that the product is its own, so a
manifest that lies about its product is refused by the path it reached (`WrongProduct`), and a
host without a self-update port hands an updater build to the managed updater, which refuses it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Protocol

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import ClaimInProgress, DaemonState, RunRecord
from agent_daemon.errors import AgentError
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.claim_keeper import ClaimKeeper
from agent_daemon.minute.claim_window import claim_deadline, claim_is_open, end_reason
from agent_daemon.minute.daemon_lines import error_fields
from agent_daemon.minute.decision import TickResult
from agent_daemon.minute.reporting import ReportSender
from agent_daemon.minute.swap_confirmation import SwapConfirmation
from agent_daemon.self_update.pending_switch import SwitchRun
from agent_daemon.updater.swap_gate import ConfirmSwap
from agent_daemon.updater.update_records import SwitchUnderWay, UpdateOutcome, UpdateRequest
from ground.contract import OutcomeReason, format_instant
from signed_release.errors import ManifestError
from signed_release.manifest import parse_manifest

__all__ = ["MAX_DISPATCH_ATTEMPTS", "Dispatcher", "SelfUpdatePort", "UpdaterPort"]

# A claim whose dispatch raised or was interrupted (a crash, a full disk) is retried on later
# minutes, then reported as failed, so one broken update cannot hold the agent forever. A failure
# that says the platform was unavailable or the download was cut does not count: those are tried
# again until the window closes.
MAX_DISPATCH_ATTEMPTS = 3
# Failures that may pass and do not count against MAX_DISPATCH_ATTEMPTS (a full disk does).
_UNCOUNTED = frozenset(
    {
        OutcomeReason.PLATFORM_UNAVAILABLE,
        OutcomeReason.DOWNLOAD_FAILED,
    }
)


class UpdaterPort(Protocol):
    """What the daemon needs of `agent_daemon.updater.Updater`."""

    def apply(self, request: UpdateRequest) -> UpdateOutcome: ...

    def settle(self, reason: OutcomeReason) -> UpdateOutcome | None: ...

    def installed_version(self) -> str | None: ...

    def accepted_floor(self, now: datetime) -> int | None: ...


class SelfUpdatePort(Protocol):
    """What the daemon needs of `agent_daemon.self_update.seam.SelfUpdater`."""

    def running_version(self) -> str | None: ...

    def apply(self, request: UpdateRequest) -> UpdateOutcome | SwitchUnderWay: ...

    def restart(self) -> None: ...

    def accepted_floor(self, now: datetime) -> int | None: ...

    def accept(self, run: SwitchRun) -> None: ...


def is_self_update(manifest: bytes) -> bool:
    """Whether the manifest names nachtwacht's own agent: for the routing only (see the
    module's docstring); a manifest that cannot be read goes to the managed updater, which
    refuses it."""
    try:
        return parse_manifest(manifest).product == "updater"
    except ManifestError:
        return False


class Dispatcher:
    def __init__(
        self,
        *,
        control: ControlPlaneClient,
        updater: UpdaterPort,
        keeper: ClaimKeeper,
        reports: ReportSender,
        server_clock: ServerClock,
        log: EventLog,
        stop_requested: Callable[[], bool],
        self_update: SelfUpdatePort | None = None,
    ) -> None:
        self._control = control
        self._self_update = self_update
        self._updater = updater
        self._keeper = keeper
        self._reports = reports
        self._clock = server_clock
        self._log = log
        self._stop_requested = stop_requested

    def dispatch(self, state: DaemonState, claim: ClaimInProgress, now: datetime) -> TickResult:
        if self._stop_requested():
            self._log.emit("daemon.parked", slot_key=claim.slot_key, run_id=claim.run_id)
            return "parked"
        if not claim_is_open(claim, now):
            self.end_after_window(state, claim, now)
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
        self._keeper.save(state)
        if not self._keeper.on_disk(claim):
            return self._wait_for_the_disk(state, claim, now)
        self._log.emit(
            "update.dispatching",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=claim.release_version,
            attempt=claim.attempts,
        )
        installed = self._updater.installed_version()
        self_update = self._self_update
        outcome: UpdateOutcome | SwitchUnderWay
        if self_update is not None and is_self_update(request.manifest):
            outcome = self_update.apply(request)
            if isinstance(outcome, SwitchUnderWay):
                self._switched_own_build(state, claim, outcome, self_update, now=now)
                return "dispatched"
        elif not resuming and installed == claim.release_version:
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

    def _switched_own_build(
        self,
        state: DaemonState,
        claim: ClaimInProgress,
        under_way: SwitchUnderWay,
        self_update: SelfUpdatePort,
        *,
        now: datetime,
    ) -> None:
        """The updater switched to its new build: the claim ends here, unreported (the build that
        learns the outcome reports it, for the run kept beside the switch), and only once that
        is on disk is the unit restarted — the new build must never find the claim and take the
        release a second time."""
        record = RunRecord(
            at=now,
            trigger=claim.trigger,
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            status="switching",
            version=under_way.version,
        )
        self._keeper.end(claim.run_id)
        if not self._keeper.save(state.model_copy(update={"claim": None}).with_run(record)):
            # The restart goes on: `current` names the new build already, and holding it back
            # would let the guard take a good build back at its deadline. The claim left in the
            # state file is ended at the next start by the switch's own record (its run, written
            # before the links moved), before anything else: never carried on, reported once.
            self._log.emit(
                "self_update.claim_unsaved",
                level="error",
                slot_key=claim.slot_key,
                run_id=claim.run_id,
                error=self._keeper.last_write_error or "the state file could not be written",
                detail="the claim's end could not be saved before the restart; the next start "
                "ends it from the switch's record: free space in the state directory",
            )
        self._log.emit(
            "self_update.switching",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            version=under_way.version,
            switched_at=_instant_or_none(under_way.switched_at),
        )
        try:
            self_update.restart()
        except AgentError as exc:
            # `current` names the new build already: the next start runs it, and the guard's
            # timer takes the switch back at its deadline if none comes.
            self._log.emit("self_update.restart_failed", level="error", **error_fields(exc))

    def settle_orphan(self, state: DaemonState) -> None:
        """An update the updater still holds with no claim of ours behind it (its claim was given
        up or ended, or the daemon restarted in between): end it, never switching, so it never
        blocks the next release; reported unless its run already was."""
        orphan = self._settle_updater(OutcomeReason.INTERRUPTED)
        if orphan is None:
            return
        reported = {run.run_id for run in state.recent_runs} | self._keeper.ended_runs
        if orphan.run_id not in reported:
            self._reports.queue_outcome(slot_key=None, outcome=orphan)
        self._reports.flush()

    def end_after_window(self, state: DaemonState, claim: ClaimInProgress, now: datetime) -> None:
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

    def _settle_updater(self, reason: OutcomeReason) -> UpdateOutcome | None:
        """Let the updater end an update no open claim stands behind, without a new switch; None
        when nothing was in progress or it cannot be done this minute."""
        try:
            outcome = self._updater.settle(reason)
        except Exception as exc:
            self._log.emit("update.resume_failed", level="error", **error_fields(exc))
            return None
        if outcome is not None:
            self._log.emit(
                "update.resumed",
                run_id=outcome.run_id,
                status=outcome.status,
                reason=outcome.reason,
            )
        return outcome

    def _wait_for_the_disk(
        self, state: DaemonState, claim: ClaimInProgress, now: datetime
    ) -> TickResult:
        """The claim's run is not in the state file (the disk refused it): it is not handed to the
        updater, as a restart would forget it and the update could be repeated or lost. It waits
        for the disk as a failure that may pass — counted, within the window — and then ends
        `failed` (`disk_full`), nothing switched."""
        error = (
            "the claim could not be saved in the daemon's state file (the state directory's disk "
            "refused the write), so the update was not started: a restart would have forgotten it"
        )
        self._log.emit(
            "claim.unsaved",
            level="error",
            slot_key=claim.slot_key,
            run_id=claim.run_id,
            attempt=claim.attempts,
            error=self._keeper.last_write_error or "the state file could not be written",
            detail=f"{error}; tried again next minute while its window is open, at most "
            f"{MAX_DISPATCH_ATTEMPTS} times, then reported failed (disk_full): free space in the "
            "state directory",
        )
        unsaved = UpdateOutcome(
            status="failed",
            version=self._updater.installed_version(),
            error=error,
            run_id=claim.run_id,
            reason=OutcomeReason.DISK_FULL,
            retry=True,
        )
        if claim.attempts < MAX_DISPATCH_ATTEMPTS and claim_is_open(claim, self._clock.now()):
            return self._retry_later(state, claim, unsaved, counted=True)
        self._finish(
            state, claim, replace(unsaved, error=f"{error}; nothing was switched"), now=now
        )
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
        self._keeper.save(state.model_copy(update={"claim": claim}))
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
        self._keeper.end(claim.run_id)
        self._keeper.save(state.model_copy(update={"claim": None}).with_run(record))
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


def _instant_or_none(at: datetime | None) -> str | None:
    return None if at is None else format_instant(at)


def _decode(text: str, field: str) -> bytes:
    """Strict base64 of the control plane's answer (untrusted): `ValueError` naming the field."""
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{field}: {text[:40]!r}… is not valid base64 ({exc})") from exc
