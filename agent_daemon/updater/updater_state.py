"""The updater's crash-safe state file, `updater-state.json` in the state directory.

Every step of an update is recorded before it runs and after it ran (atomically: temp file, fsync,
`os.replace`, fsync the directory — `atomic_file`), so a process killed at any step boundary can be
restarted and finish or undo exactly that step. A file written by a newer format is refused with an
explanation rather than misread.

What it holds:
- `floor`: the highest `manifest_version` this host accepted; anything at or below is a rollback.
- `floors`: the same per release key (key id → the highest `manifest_version` accepted under its
  signature). The floor a release is checked against is the highest of the keys still trusted: a
  key that the trust root dropped (compromised) takes the floor it set with it, so a manifest it
  signed with an absurd `manifest_version` cannot keep every later release out (a fast-forward).
  A file from before `floors` has only `floor`, which applies until a release is accepted.
- `builds`: what the signed manifest said about each installed version (its issue date is the
  "running build's date" a sane clock cannot be earlier than).
- `bad_versions`: versions that failed their self-test or health check here; never retried.
- `in_progress`: the update under way, with the links as they were before it, so it can be undone.
- `last_outcome`: the outcome of the last finished update, so asking again for the same run gives
  the same answer instead of a second attempt.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

from agent_daemon.disk.atomic_file import VersionedModelFile
from agent_daemon.disk.daemon_state import KeptReason
from ground.contract import reason_for_contract

__all__ = [
    "STATE_FILE_NAME",
    "STATE_FORMAT_VERSION",
    "Build",
    "InProgress",
    "RecordedOutcome",
    "Step",
    "UpdaterState",
    "UpdaterStateStore",
]

STATE_FILE_NAME = "updater-state.json"
STATE_FORMAT_VERSION = 1

# The steps of one update, in order; each names what has been done (and recorded) so far.
#   accepted     verified; the download is next
#   downloaded   the artifact is in staging and matches the signed length and sha256
#   installed    versions/<v>/ is complete and passed its self-test
#   switching    the intended links are recorded; `previous` and `current` are being replaced
#   switched     `current` points at the new version; restart and health check are next
#   rolling_back the new version failed; the links go back to `from_version`/`previous_before`
Step = Literal["accepted", "downloaded", "installed", "switching", "switched", "rolling_back"]


class _Frozen(BaseModel):
    # Unknown fields are ignored, not refused: the next release may add a field (optional, its
    # absence meaning what it meant before), and after a switch back this one must still read
    # the file (`disk.atomic_file`). Code that builds a model is checked by mypy instead.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Build(_Frozen):
    manifest_version: int
    issued_at: AwareDatetime
    sha256: str


class InProgress(_Frozen):
    run_id: str
    step: Step
    version: str
    manifest_b64: str
    signature_b64: str
    artifact_url: str
    from_version: str | None
    previous_before: str | None
    failure: str | None = None
    # How often the update was carried on (apply, then each resume); bounded by the updater's
    # MAX_RUN_ATTEMPTS so an update that keeps being interrupted ends as an outcome.
    attempts: int = 0
    # When the switch was allowed (the control plane's time, as this host knew it): set just
    # before `switching` is recorded, reported as the run's `switched_at`.
    switched_at: AwareDatetime | None = None

    @property
    def manifest_bytes(self) -> bytes:
        return base64.b64decode(self.manifest_b64)

    @property
    def signature_bytes(self) -> bytes:
        return base64.b64decode(self.signature_b64)


class RecordedOutcome(_Frozen):
    run_id: str
    status: Literal["succeeded", "failed", "rolled_back"]
    version: str | None
    error: str | None
    reason: KeptReason = None
    switched_at: AwareDatetime | None = None
    retry: bool = False


class UpdaterState(_Frozen):
    floor: int | None = None
    floors: dict[str, int] = {}
    builds: dict[str, Build] = {}
    bad_versions: dict[str, str] = {}
    in_progress: InProgress | None = None
    last_outcome: RecordedOutcome | None = None

    def floor_for(self, trusted_key_ids: Iterable[str]) -> int | None:
        """The rollback floor under the release keys trusted now (see the module's docstring)."""
        if not self.floors:
            return self.floor
        kept = [self.floors[key] for key in trusted_key_ids if key in self.floors]
        return max(kept) if kept else None

    def with_step(self, step: Step, *, failure: str | None = None) -> UpdaterState:
        """The update in progress, advanced to `step` (and, when rolling back, why)."""
        assert self.in_progress is not None
        update: dict[str, object] = {"step": step}
        if failure is not None:
            update["failure"] = failure
        return self.model_copy(update={"in_progress": self.in_progress.model_copy(update=update)})

    def with_attempt(self) -> UpdaterState:
        """The update in progress, counted once more."""
        assert self.in_progress is not None
        attempts = self.in_progress.attempts + 1
        return self.model_copy(
            update={"in_progress": self.in_progress.model_copy(update={"attempts": attempts})}
        )

    def finished(
        self,
        outcome: RecordedOutcome,
        *,
        floor: int | None = None,
        signer: str | None = None,
        build: tuple[str, Build] | None = None,
        bad: tuple[str, str] | None = None,
        at: datetime,
    ) -> UpdaterState:
        """Nothing in progress any more. `floor` raises the rollback floor, `build` (version,
        facts) records an installed build, `bad` (version, reason) marks one never to retry;
        `signer` is the key id that signed the release that set `floor`."""
        changes: dict[str, object] = {"in_progress": None, "last_outcome": outcome}
        if floor is not None:
            changes["floor"] = max(self.floor or 0, floor)
            if signer is not None:
                changes["floors"] = {**self.floors, signer: max(self.floors.get(signer, 0), floor)}
        if build is not None:
            changes["builds"] = {**self.builds, build[0]: build[1]}
        if bad is not None:
            stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
            changes["bad_versions"] = {**self.bad_versions, bad[0]: f"{stamp}: {bad[1]}"}
        return self.model_copy(update=changes)

    def protected_versions(self) -> set[str]:
        """Versions the state file points at: retention must never delete them."""
        if self.in_progress is None:
            return set()
        names = {self.in_progress.version, self.in_progress.from_version}
        names.add(self.in_progress.previous_before)
        return {name for name in names if name is not None}


class UpdaterStateStore(VersionedModelFile[UpdaterState]):
    def __init__(self, state_dir: Path) -> None:
        super().__init__(
            state_dir / STATE_FILE_NAME,
            UpdaterState,
            format_version=STATE_FORMAT_VERSION,
            what="updater state",
        )

    def save(self, state: UpdaterState) -> None:
        """The state, its last outcome's reason in the oldest contract's words (the one a control
        plane of an older contract is told too). The last outcome stays in the file until the next
        update ends, and the previous release, switched back to, refuses a whole state holding a
        reason it does not know: every later update on the host would fail. Only a failed run's
        outcome can carry a newer reason, and a failed run's is never answered again from the file
        (`Updater` tries a failed run again), so the older word loses nothing."""
        last = state.last_outcome
        if last is not None:
            older = reason_for_contract(last.reason, None)
            if older is not last.reason:
                last = last.model_copy(update={"reason": older})
                state = state.model_copy(update={"last_outcome": last})
        super().save(state)
