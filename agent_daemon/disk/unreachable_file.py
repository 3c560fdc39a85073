"""The slots whose window the agent was inside while it could not reach the control plane, kept
until it can say so (`minute.unreachable_slots`): a file of its own beside the daemon's state.

Its own file, not a field of the daemon's state: the agent of the previous release, if switched
back to, refuses a state file with a field it does not know, and never reads this one. Written
atomically with a format version (`atomic_file`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from agent_daemon.disk.atomic_file import VersionedModelFile

__all__ = ["UNREACHABLE_FILE_NAME", "UnreachableSlot", "UnreachableSlots", "UnreachableSlotsFile"]

UNREACHABLE_FILE_NAME = "unreachable-slots.json"
UNREACHABLE_FORMAT_VERSION = 1


class _Frozen(BaseModel):
    # As the daemon's state: a field a newer release adds is ignored, not refused.
    model_config = ConfigDict(extra="ignore", frozen=True)


class UnreachableSlot(_Frozen):
    """A scheduled slot whose window the agent was inside, tried to poll or claim, and could not
    reach the control plane. `error` is the first failure's text; the times are the first and the
    last try, on the control plane's clock as the agent followed it."""

    slot_key: str
    slot_at: AwareDatetime
    error: str
    first_tried_at: AwareDatetime
    last_tried_at: AwareDatetime
    attempts: int = Field(default=1, ge=1)


class UnreachableSlots(_Frozen):
    slots: tuple[UnreachableSlot, ...] = ()


class UnreachableSlotsFile(VersionedModelFile[UnreachableSlots]):
    def __init__(self, path: Path) -> None:
        super().__init__(
            path,
            UnreachableSlots,
            format_version=UNREACHABLE_FORMAT_VERSION,
            what="list of slots the control plane could not be reached in",
        )
