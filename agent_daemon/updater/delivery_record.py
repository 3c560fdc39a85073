"""How the build of the update in progress (or the last one) came: `delivery.json` in the state
directory, beside the updater's state file and written the same way (`disk.atomic_file`).

`patch` (from this host's base) or `full`, and why a patch its release offered was not used.
Recorded before the step after the download is, so an update carried on by another process (a
resume after a crash) reports it too, and so does the same run asked again.

A file of its own, not a field of `updater-state.json`: the previous release refuses fields it
does not know in that file, and the updater may be switched back to it (`disk.atomic_file`);
this file it never opens. One record, for one run: a record naming another run says nothing.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agent_daemon.disk.atomic_file import VersionedModelFile
from agent_daemon.errors import DaemonStateError
from agent_daemon.updater.update_records import UpdateOutcome
from ground.contract import PatchFallbackReason

__all__ = ["DELIVERY_FILE_NAME", "DeliveryRecord", "DeliveryStore"]

DELIVERY_FILE_NAME = "delivery.json"
_FORMAT_VERSION = 1


class DeliveryRecord(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    run_id: str
    kind: Literal["patch", "full"]
    fallback_reason: PatchFallbackReason | None = None


class DeliveryStore(VersionedModelFile[DeliveryRecord]):
    def __init__(self, state_dir: Path) -> None:
        super().__init__(
            state_dir / DELIVERY_FILE_NAME,
            DeliveryRecord,
            format_version=_FORMAT_VERSION,
            what="delivery record",
        )

    def of(self, run_id: str) -> DeliveryRecord | None:
        """The record of `run_id`; None when there is none (or it cannot be read: the outcome
        is reported without it rather than not at all)."""
        if not self.path.is_file():
            return None
        try:
            record = self.load()
        except (DaemonStateError, OSError, ValueError):
            return None
        return record if record.run_id == run_id else None

    def told(self, outcome: UpdateOutcome) -> UpdateOutcome:
        """`outcome` with how its build came, when this host recorded it."""
        record = self.of(outcome.run_id)
        if record is None:
            return outcome
        return replace(outcome, delivery=record.kind, fallback_reason=record.fallback_reason)
