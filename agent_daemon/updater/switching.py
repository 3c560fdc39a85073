"""The switch and the way back: `current` and `previous` swapped, the agent restarted and
health-checked, and — when that fails — the links restored and the old version restarted.

`Switcher` also ends an update after an unexpected failure (a defect, an input nobody imagined,
too many interruptions) from whatever step was recorded last: before the swap it failed and the
old version runs on; after it the links go back to the old version, and when even that fails the
update is abandoned with the links restored as well as possible. Nothing here leaves `in_progress`
behind to block the next release.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_daemon.updater.failure_reasons import clip, describe
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.managed_service import AgentService
from agent_daemon.updater.step_recorder import StepRecorder
from agent_daemon.updater.update_records import UpdateOutcome
from agent_daemon.updater.updater_state import UpdaterState, UpdaterStateStore
from ground.contract import OutcomeReason
from signed_release.manifest import Manifest, parse_manifest

__all__ = ["BEFORE_THE_SWAP", "RollBack", "Switcher"]

# The steps at which the old version never stopped running.
BEFORE_THE_SWAP = ("accepted", "downloaded", "installed")


class RollBack(Exception):
    """The switched-to build failed after the switch: go back."""


class Switcher:
    def __init__(
        self,
        *,
        layout: InstallLayout,
        service: AgentService,
        store: UpdaterStateStore,
        recorder: StepRecorder,
        on_step: Callable[[str], None],
    ) -> None:
        self._layout = layout
        self._service = service
        self._store = store
        self._recorder = recorder
        self._on_step = on_step

    def switch(self, *, previous: str | None, current: str | None) -> None:
        # `previous` first: between the two replacements `current` still names a whole version.
        self._layout.point("previous", previous)
        self._on_step("between_links")
        self._layout.point("current", current)

    def restart_and_check(self, version: str) -> None:
        """Restart the agent on `version` and wait for its health; `RollBack` when it fails."""
        problem = self._service.restart()
        if problem is not None:
            raise RollBack(problem)
        problem = self._service.wait_healthy(version)
        if problem is not None:
            raise RollBack(problem)

    def roll_back(self, state: UpdaterState, manifest: Manifest) -> UpdateOutcome:
        progress = state.in_progress
        assert progress is not None and progress.from_version is not None
        failure = progress.failure or "the new version failed"
        self.switch(previous=progress.previous_before, current=progress.from_version)
        self._on_step("links_restored")
        error = f"{progress.version}: {failure}; rolled back to {progress.from_version}"
        old_problem = self._service.restart() or self._service.wait_healthy(progress.from_version)
        if old_problem is not None:
            error += f"; {progress.from_version} is not healthy either: {old_problem}"
        return self._recorder.finish(
            state,
            manifest,
            status="rolled_back",
            error=error,
            bad_reason=failure,
            reason=OutcomeReason.HEALTH_CHECK_FAILED,
        )

    def end_unexpected(self, error: str) -> UpdateOutcome:
        """End the update in progress now, from whatever step was recorded last: before the switch
        it failed and the old version runs on; after it, the links go back to the old version."""
        state = self._store.load()
        progress = state.in_progress
        if progress is None:
            # It ended after all (the failure came after the commit).
            last = state.last_outcome
            assert last is not None
            return UpdateOutcome(**last.model_dump())
        error = clip(error)
        if progress.step in BEFORE_THE_SWAP:
            return self._recorder.finish_failed(
                state, error, bad=False, reason=OutcomeReason.INTERRUPTED
            )
        if progress.step in ("switching", "switched") and progress.from_version is not None:
            state = self._recorder.advance(state, "rolling_back", failure=error)
            try:
                return self.roll_back(state, parse_manifest(progress.manifest_bytes))
            except Exception as exc:
                error = f"{error}; the rollback failed too: {describe(exc)}"
        return self._abandon(state, error)

    def _abandon(self, state: UpdaterState, error: str) -> UpdateOutcome:
        """Last resort after the switch: put the links back as well as possible, record the end,
        mark the version bad. The next release finds nothing in progress."""
        progress = state.in_progress
        assert progress is not None
        if progress.from_version is not None:
            try:
                self.switch(previous=progress.previous_before, current=progress.from_version)
            except OSError as exc:
                error += f"; the links could not be restored: {describe(exc)}"
        back = progress.from_version is not None and self._recorder.installed_version() == (
            progress.from_version
        )
        return self._recorder.finish(
            state,
            parse_manifest(progress.manifest_bytes),
            status="rolled_back" if back else "failed",
            error=clip(f"{progress.version}: {error}"),
            bad_reason=clip(error),
            reason=OutcomeReason.INTERRUPTED,
        )
