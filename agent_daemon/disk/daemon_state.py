"""The daemon's crash-safe state: the last consumed slot, the claim in progress, recent runs.

Written atomically with a format version (`atomic_file`). The order of writes is the point: a
granted claim is persisted, together with the consumed slot, before anything else happens, so a
daemon killed at any moment afterwards resumes that claim and never claims or installs the slot
twice.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, BeforeValidator, ConfigDict

from agent_daemon.disk.atomic_file import VersionedModelFile
from ground.contract import OutcomeReason

__all__ = [
    "STATE_FORMAT_VERSION",
    "ClaimInProgress",
    "ConsumedSlot",
    "DaemonState",
    "KeptReason",
    "RunRecord",
    "StateStore",
]

STATE_FORMAT_VERSION = 1
KEEP_RUNS = 20
KEEP_MANUAL_IDS = 50


def _known_reason_or_none(value: object) -> object:
    # The next release may record a reason this one does not know; after a switch back this one
    # must still read its files (an unreadable state stops every later update on the host), so
    # such a reason reads as none. Anything else that is not a reason is still refused.
    if isinstance(value, str):
        try:
            return OutcomeReason(value)
        except ValueError:
            return None
    return value


# An `OutcomeReason` kept in a state file.
KeptReason = Annotated[OutcomeReason | None, BeforeValidator(_known_reason_or_none)]


class _Frozen(BaseModel):
    # Unknown fields are ignored, not refused: the next release may add a field (optional, its
    # absence meaning what it meant before), and after a switch back this one must still read
    # the file (`disk.atomic_file`). Code that builds a model is checked by mypy instead.
    model_config = ConfigDict(extra="ignore", frozen=True)


class ConsumedSlot(_Frozen):
    key: str
    at: AwareDatetime


class ClaimInProgress(_Frozen):
    """A granted claim. `phase` says whether the updater may already have started on it."""

    run_id: str
    trigger: Literal["schedule", "manual"]
    slot_key: str | None
    release_version: str
    manifest_b64: str
    signature_b64: str
    artifact_url: str
    claimed_at: AwareDatetime
    phase: Literal["claimed", "dispatching"] = "claimed"
    attempts: int = 0
    # The end of the slot's catch-up window (None for a manual run) and of the token, on the
    # control plane's clock: after the earlier of the two the run is never switched
    # (`claim_window`). Absent from a state file written by an agent that did not record it.
    window_closes_at: AwareDatetime | None = None
    token_expires_at: AwareDatetime | None = None
    # The last failure that may pass (the platform unavailable, a cut download, a full disk):
    # the reason the run ends with when its window closes before it could finish.
    last_reason: KeptReason = None
    last_error: str | None = None


class RunRecord(_Frozen):
    """One line of `nachtwacht agent status`: what happened to a slot or a manual request."""

    at: AwareDatetime
    trigger: Literal["schedule", "manual"]
    slot_key: str | None
    run_id: str | None
    status: str
    version: str | None = None
    error: str | None = None
    reason: str | None = None


class DaemonState(_Frozen):
    last_consumed: ConsumedSlot | None = None
    claim: ClaimInProgress | None = None
    handled_manual_runs: tuple[str, ...] = ()
    recent_runs: tuple[RunRecord, ...] = ()

    def consume(self, slot: ConsumedSlot) -> DaemonState:
        if self.last_consumed is not None and self.last_consumed.at >= slot.at:
            return self
        return self.model_copy(update={"last_consumed": slot})

    def with_run(self, record: RunRecord) -> DaemonState:
        runs = (*self.recent_runs, record)[-KEEP_RUNS:]
        return self.model_copy(update={"recent_runs": runs})

    def with_manual_handled(self, run_id: str) -> DaemonState:
        if run_id in self.handled_manual_runs:
            return self
        handled = (*self.handled_manual_runs, run_id)[-KEEP_MANUAL_IDS:]
        return self.model_copy(update={"handled_manual_runs": handled})

    @property
    def last_consumed_at(self) -> datetime | None:
        return None if self.last_consumed is None else self.last_consumed.at


class StateStore(VersionedModelFile[DaemonState]):
    def __init__(self, path: Path) -> None:
        super().__init__(
            path, DaemonState, format_version=STATE_FORMAT_VERSION, what="daemon state"
        )
