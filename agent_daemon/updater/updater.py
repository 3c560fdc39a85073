"""The updater of the managed agent: one update on a customer host, from a claimed release to the
agent running the new build — or the old one again.

    apply(request)
      verify ─► accepted ─► download ─► downloaded ─► install + self-test ─► installed
        ─► switching (previous := old current, current := new) ─► switched
        ─► restart + health check ─► commit (floor, build facts)          → succeeded
                                   └► rolling_back ─► links back, restart,
                                      old version's health, mark bad      → rolled_back

Each arrow is a state-file write (`updater_state`) made before the next step starts, so a
process killed anywhere is finished by `resume()` from the last recorded step; every step is safe to
run twice. Until `switched` the old version never stopped running; a refusal or failure there is an
outcome with status `failed`. The verifying core (`agent_daemon.updater.verify`) is pure.

This module is the interface — the lock, the acceptance of a request (the artifact's source, the
signed manifest, the versions marked bad) and the three entry points. Its parts, each a module:
the steps from `accepted` on (`step_machine`), the switch, the health check and the way back
(`switching`), the state-file writes and outcomes (`step_recorder`), one update at a time
(`update_locking`) and the reasons of a failure (`failure_reasons`).

What ends each failure of an accepted update (docs/agent_updater.md "The state machine"):

* an `UpdateError` or `OSError` before the switch → `failed`, the running version untouched;
* after the switch (restart, health) → rolled back → `rolled_back` (`failed` on a first install);
* any other exception — a defect, or an input nobody imagined — is ended the same way at once by
  `Switcher.end_unexpected`: it never leaves `in_progress` behind to block the next release;
* an interruption (the process killed, the state directory not writable, a link not replaceable)
  keeps the recorded step for `resume()`, but each carry-on counts an attempt: past
  `MAX_RUN_ATTEMPTS` the update is given up — links restored, outcome recorded — instead of tried
  forever.

Revocation is honoured up to the swap (`swap_gate`): with the request comes a `ConfirmSwap`, asked
right before `switching` is recorded. Refused → `failed` (the staged build removed); unanswered →
`failed` with `retry`, the step stays `installed` (not counted as an attempt) and the same run,
applied again, asks again. `settle(reason)` ends an update whose window has closed without a new
switch: before the swap it ends as `failed` with that reason; after it (health check, roll back)
it is finished as `resume()` would — that switch happened inside the window.

Every outcome names its `reason` (`ground.contract.OutcomeReason`) when it is not a plain success,
and `retry` when the failure may pass (the platform unavailable, a cut download, a full disk):
nothing switched, and the daemon applies the same run again while its window is open.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from datetime import datetime

import httpx

from agent_daemon.errors import (
    DaemonStateError,
    UpdateError,
    UpdateInProgress,
    VersionMarkedBad,
)
from agent_daemon.updater.delivery_record import DeliveryStore
from agent_daemon.updater.failure_reasons import describe, failure_reason
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.managed_service import AgentService
from agent_daemon.updater.release_keys import floor_now, trusted_release_keys
from agent_daemon.updater.step_machine import StepMachine
from agent_daemon.updater.step_recorder import StepRecorder
from agent_daemon.updater.switching import BEFORE_THE_SWAP, Switcher
from agent_daemon.updater.update_locking import update_lock, updater_umask
from agent_daemon.updater.update_records import OnProgress, UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_state import InProgress, UpdaterState, UpdaterStateStore
from agent_daemon.updater.verify import VerifiedRelease, verify_release
from ground.clock import Clock
from ground.contract import OutcomeReason

__all__ = ["Updater"]


class Updater:
    """Applies one update at a time. `on_step` (optional) is called with the name of each step
    boundary right after it is recorded — the crash tests kill the process there."""

    def __init__(
        self,
        *,
        settings: UpdaterSettings,
        client: httpx.Client,
        clock: Clock,
        on_step: Callable[[str], None] | None = None,
        on_progress: OnProgress | None = None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._on_step = on_step or (lambda _step: None)
        self._layout = InstallLayout(settings.install_root)
        self._store = UpdaterStateStore(settings.state_dir)
        # How each update's build came, reported with its outcome (a file of its own).
        self._deliveries = DeliveryStore(settings.state_dir)
        self._staging = settings.state_dir / "staging"
        service = AgentService(
            restart_command=settings.restart_command,
            health_command=settings.health_command,
            deadline_seconds=settings.health_deadline_seconds,
            poll_seconds=settings.health_poll_seconds,
            clock=clock,
            agent_user=settings.agent_user,
            # (step, done, total) during long steps: "download" in bytes, "health" in seconds.
            on_progress=on_progress,
        )
        self._recorder = StepRecorder(
            store=self._store,
            layout=self._layout,
            staging=self._staging,
            clock=clock,
            on_step=self._on_step,
        )
        self._switcher = Switcher(
            layout=self._layout,
            service=service,
            store=self._store,
            recorder=self._recorder,
            on_step=self._on_step,
        )
        self._machine = StepMachine(
            settings=settings,
            client=client,
            clock=clock,
            layout=self._layout,
            store=self._store,
            staging=self._staging,
            recorder=self._recorder,
            switcher=self._switcher,
            on_progress=on_progress,
        )

    # -- the interface ------------------------------------------------------------------------

    @property
    def settings(self) -> UpdaterSettings:
        return self._settings

    def installed_version(self) -> str | None:
        """The version `current` names (a complete one), or None before the first install."""
        return self._layout.link_target("current")

    def accepted_floor(self, now: datetime) -> int | None:
        """The rollback floor under the release keys trusted at `now`, or None."""
        return floor_now(self._store.load(), self._settings, now)

    def apply(self, request: UpdateRequest) -> UpdateOutcome:
        """Verify, install, switch, restart, health-check, and commit or roll back. Refusals and
        failures are outcomes; the old version keeps running in every refusal."""
        with updater_umask():
            try:
                with update_lock(self._settings.state_dir):
                    return self._deliveries.told(self._apply_guarded(request))
            except UpdateInProgress as exc:
                return self._recorder.outcome(
                    request.run_id,
                    "failed",
                    error=str(exc),
                    reason=OutcomeReason.INTERRUPTED,
                    retry=True,
                )
            except DaemonStateError as exc:
                return self._recorder.outcome(request.run_id, "failed", error=str(exc))
            except OSError as exc:
                # E.g. the state directory is full or read-only: whatever step was recorded last
                # is carried on by the same run applied again (at most MAX_RUN_ATTEMPTS).
                reason, retry = failure_reason(exc)
                return self._recorder.outcome(
                    request.run_id,
                    "failed",
                    error=f"update interrupted: {describe(exc)}",
                    reason=reason,
                    retry=retry,
                )

    def resume(self) -> UpdateOutcome | None:
        """After a crash: finish (or undo) what the state file says was in progress; None when
        nothing was. Each call counts an attempt; past MAX_RUN_ATTEMPTS the update is given up
        (links restored, outcome recorded). Raises UpdateInProgress while another process
        updates, DaemonStateError for an unreadable or newer state file, OSError when the state
        cannot be written."""
        with updater_umask(), update_lock(self._settings.state_dir):
            state = self._store.load()
            if state.in_progress is None:
                return None
            return self._deliveries.told(self._machine.run(state, confirm=None))

    def settle(self, reason: OutcomeReason) -> UpdateOutcome | None:
        """End the update in progress without a new switch (its window closed, or no claim is
        behind it any more); None when nothing was in progress.

        Before the swap it ends `failed` with `reason` — nothing switched, the staged build
        removed, so the next slot starts fresh. After it (the switch was allowed inside the
        window; the health check or a roll back was pending) it is finished as `resume()` does,
        which is not a new switch. Raises as `resume()` does."""
        with updater_umask(), update_lock(self._settings.state_dir):
            state = self._store.load()
            progress = state.in_progress
            if progress is None:
                return None
            if progress.step in BEFORE_THE_SWAP:
                error = (
                    f"update to {progress.version} ended at step {progress.step!r} without "
                    f"switching ({reason.value})"
                )
                ended = self._recorder.finish_failed(
                    state, error, bad=False, reason=reason, keep=False
                )
            else:
                ended = self._machine.run(state, confirm=None)
            return self._deliveries.told(ended)

    # -- steps --------------------------------------------------------------------------------

    def _apply_guarded(self, request: UpdateRequest) -> UpdateOutcome:
        try:
            return self._apply_locked(request)
        except (OSError, UpdateInProgress, DaemonStateError):
            raise
        except Exception as exc:
            # Only a defect gets here (`_run` ends every failure of the steps itself). It costs
            # this run, never the host: an update it left recorded is ended too.
            in_progress = self._store.load().in_progress
            if in_progress is not None and in_progress.run_id == request.run_id:
                return self._switcher.end_unexpected(describe(exc))
            return self._recorder.outcome(
                request.run_id, "failed", error=f"update failed: {describe(exc)}"
            )

    def _apply_locked(self, request: UpdateRequest) -> UpdateOutcome:
        state = self._store.load()
        last = state.last_outcome
        if last is not None and last.run_id == request.run_id and last.status != "failed":
            # The same run again (the daemon died before reporting): the same answer, not a
            # second attempt. A failed run may be tried again.
            return UpdateOutcome(**last.model_dump())
        if state.in_progress is not None:
            if state.in_progress.run_id == request.run_id:
                return self._machine.run(state, confirm=request.confirm_swap)
            return self._recorder.outcome(
                request.run_id,
                "failed",
                error=f"update {state.in_progress.run_id} is unfinished; resume() it first",
            )
        installed = self.installed_version()
        try:
            # Checked before anything is stored: the URL is the control plane's word, untrusted.
            self._machine.source(request.artifact_url)
            verified = self._verify(request, state, installed)
        except UpdateError as exc:
            reason, retry = failure_reason(exc)
            return self._recorder.outcome(
                request.run_id, "failed", error=str(exc), reason=reason, retry=retry
            )
        if verified.version == installed:
            return self._recorder.commit_without_change(
                state, request.run_id, verified.manifest, signer=verified.key_id
            )
        state = state.model_copy(
            update={
                "in_progress": InProgress(
                    run_id=request.run_id,
                    step="accepted",
                    version=verified.version,
                    manifest_b64=base64.b64encode(request.manifest).decode(),
                    signature_b64=base64.b64encode(request.signature).decode(),
                    artifact_url=request.artifact_url,
                    from_version=installed,
                    previous_before=self._layout.link_target("previous"),
                )
            }
        )
        self._recorder.record(state, "accepted")
        return self._machine.run(state, confirm=request.confirm_swap)

    def _verify(
        self, request: UpdateRequest, state: UpdaterState, installed: str | None
    ) -> VerifiedRelease:
        running = state.builds.get(installed) if installed else None
        now = self._clock.now()
        trusted = trusted_release_keys(self._settings, now)
        verified = verify_release(
            request.manifest,
            request.signature,
            trusted,
            installed_version=installed,
            floor=state.floor_for(trusted),
            now=now,
            platform=self._settings.platform,
            channel=self._settings.channel,
            running_build_date=running.issued_at if running else None,
        )
        reason = state.bad_versions.get(verified.version)
        if reason is not None:
            raise VersionMarkedBad(
                f"release refused: version {verified.version} failed on this host before and is "
                f"not retried ({reason})"
            )
        return verified
