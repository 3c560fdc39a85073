"""What the updater writes at each step boundary, and the outcome each ending returns.

Each step of an update is a state-file write (`updater_state`) made before the next step starts;
`StepRecorder` makes those writes (calling `on_step` right after each, where the crash tests kill
the process) and ends an update: committed (the floor moves past the release, the build's facts
kept), failed with the running version untouched, or deferred at `installed` when the swap was
not confirmed. After an ending it tidies the install root (retention) and the staging folder.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

from agent_daemon.updater.download.staging import clean_staging
from agent_daemon.updater.failure_reasons import clip
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.swap_gate import SwapUnanswered
from agent_daemon.updater.update_records import Status, UpdateOutcome
from agent_daemon.updater.updater_state import (
    Build,
    RecordedOutcome,
    Step,
    UpdaterState,
    UpdaterStateStore,
)
from ground.clock import Clock
from ground.contract import OutcomeReason
from signed_release.manifest import Manifest, parse_manifest
from signed_release.signature import signature_key_id

__all__ = ["StepRecorder"]


class StepRecorder:
    def __init__(
        self,
        *,
        store: UpdaterStateStore,
        layout: InstallLayout,
        staging: Path,
        clock: Clock,
        on_step: Callable[[str], None],
    ) -> None:
        self._store = store
        self._layout = layout
        self._staging = staging
        self._clock = clock
        self._on_step = on_step

    def installed_version(self) -> str | None:
        """The version `current` names (a complete one), or None before the first install."""
        return self._layout.link_target("current")

    def record(self, state: UpdaterState, step_name: str) -> None:
        self._store.save(state)
        self._on_step(step_name)

    def advance(self, state: UpdaterState, step: Step, failure: str | None = None) -> UpdaterState:
        state = state.with_step(step, failure=failure)
        self.record(state, step)
        return state

    def commit(self, state: UpdaterState, manifest: Manifest) -> UpdateOutcome:
        return self.finish(
            state, manifest, status="succeeded", error=None, bad_reason=None, reason=None
        )

    def defer(self, state: UpdaterState, verdict: SwapUnanswered) -> UpdateOutcome:
        """The swap was not confirmed (no answer): stay at `installed` — the staged build kept,
        this carry-on not counted as an attempt — so the same run asks again later."""
        progress = state.in_progress
        assert progress is not None
        kept = progress.model_copy(update={"attempts": max(0, progress.attempts - 1)})
        self._store.save(state.model_copy(update={"in_progress": kept}))
        self._on_step("swap_deferred")
        return self.outcome(
            progress.run_id,
            "failed",
            error=f"not switching to {progress.version} yet: {verdict.error}",
            reason=verdict.reason,
            retry=True,
        )

    def commit_without_change(
        self, state: UpdaterState, run_id: str, manifest: Manifest, *, signer: str
    ) -> UpdateOutcome:
        """The release names the version already running (e.g. re-signed with a later expiry)."""
        recorded = RecordedOutcome(
            run_id=run_id, status="succeeded", version=manifest.agent_version, error=None
        )
        state = state.finished(
            recorded,
            floor=manifest.manifest_version,
            signer=signer,
            build=(manifest.agent_version, _build_of(manifest)),
            at=self._clock.now(),
        )
        self.record(state, "committed")
        return UpdateOutcome(**recorded.model_dump())

    def finish(
        self,
        state: UpdaterState,
        manifest: Manifest,
        *,
        status: Status,
        error: str | None,
        bad_reason: str | None,
        reason: OutcomeReason | None,
    ) -> UpdateOutcome:
        """The release was accepted: whatever became of its build, the floor moves past it — a
        release can be fixed only by a newer manifest, never by replaying an older one."""
        progress = state.in_progress
        assert progress is not None
        recorded = RecordedOutcome(
            run_id=progress.run_id,
            status=status,
            version=self.installed_version(),
            error=None if error is None else clip(error),
            reason=reason,
            switched_at=progress.switched_at,
        )
        good = bad_reason is None
        state = state.finished(
            recorded,
            floor=manifest.manifest_version,
            signer=signature_key_id(base64.b64decode(progress.signature_b64)),
            build=(progress.version, _build_of(manifest)) if good else None,
            bad=None if bad_reason is None else (progress.version, bad_reason),
            at=self._clock.now(),
        )
        self.record(state, "committed")
        self._tidy(state, keep_part=None)
        return UpdateOutcome(**recorded.model_dump())

    def finish_failed(
        self,
        state: UpdaterState,
        error: str,
        *,
        bad: bool,
        reason: OutcomeReason | None,
        retry: bool = False,
        keep: bool = True,
    ) -> UpdateOutcome:
        """Nothing switched (or nothing to switch back to): the running version stays. `keep`:
        the partial download stays to resume (a version marked bad never keeps one)."""
        progress = state.in_progress
        assert progress is not None
        error = clip(error)
        recorded = RecordedOutcome(
            run_id=progress.run_id,
            status="failed",
            version=self.installed_version(),
            error=error,
            reason=reason,
            switched_at=progress.switched_at,
            retry=retry,
        )
        state = state.finished(
            recorded, bad=(progress.version, error) if bad else None, at=self._clock.now()
        )
        self.record(state, "failed")
        manifest = parse_manifest(progress.manifest_bytes)
        self._tidy(state, keep_part=manifest.sha256 if keep and not bad else None)
        return UpdateOutcome(**recorded.model_dump())

    def outcome(
        self,
        run_id: str,
        status: Status,
        *,
        error: str | None,
        reason: OutcomeReason | None = None,
        retry: bool = False,
    ) -> UpdateOutcome:
        """An outcome not recorded as the update's last: a refusal before it was accepted, an
        interruption, a deferral."""
        return UpdateOutcome(
            status=status,
            version=self.installed_version(),
            error=None if error is None else clip(error),
            run_id=run_id,
            reason=reason,
            retry=retry,
        )

    def _tidy(self, state: UpdaterState, *, keep_part: str | None) -> None:
        """Retention and staging clean-up; a failure here never changes an outcome."""
        try:
            self._layout.clean_temporaries()
            self._layout.apply_retention(state.protected_versions(), state.bad_versions)
            clean_staging(self._staging, keep_part=keep_part)
        except Exception:  # noqa: S110  # tidying is best effort; the outcome is recorded
            pass


def _build_of(manifest: Manifest) -> Build:
    return Build(
        manifest_version=manifest.manifest_version,
        issued_at=manifest.issued_at,
        sha256=manifest.sha256,
    )
