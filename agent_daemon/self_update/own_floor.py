"""The updater line's rollback floor: the highest `manifest_version` of nachtwacht's own agent this
host accepted, per release key, in `<updater state dir>/self-updater-state.json`.

The same rule as the managed agent's floor (`updater.updater_state`): a release of the updater
signed at or below it is a rollback or a replay and is refused, and the floor that counts is the
highest under the keys still trusted (a key the trust root dropped takes its floor with it). It
rises when a switch to a new build commits — the build then runs here — never at the switch, so a
build the guard took back can be offered again after an operator's retry. A file without it (a
host before this release) has no floor, exactly as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from agent_daemon.disk.atomic_file import VersionedModelFile

__all__ = ["OWN_FLOOR_FILE_NAME", "OwnFloorStore", "OwnFloors"]

OWN_FLOOR_FILE_NAME = "self-updater-state.json"
_FORMAT_VERSION = 1


class OwnFloors(BaseModel):
    # Unknown fields are ignored: the release after this one may add one, and after a switch
    # back this one must still read the file.
    model_config = ConfigDict(extra="ignore", frozen=True)

    floors: dict[str, int] = {}

    def floor_for(self, trusted_key_ids: Iterable[str]) -> int | None:
        kept = [self.floors[key] for key in trusted_key_ids if key in self.floors]
        return max(kept) if kept else None

    def raised(self, manifest_version: int, signer: str) -> OwnFloors:
        floor = max(self.floors.get(signer, 0), manifest_version)
        return self.model_copy(update={"floors": {**self.floors, signer: floor}})


class OwnFloorStore(VersionedModelFile[OwnFloors]):
    def __init__(self, updater_state_dir: Path) -> None:
        super().__init__(
            updater_state_dir / OWN_FLOOR_FILE_NAME,
            OwnFloors,
            format_version=_FORMAT_VERSION,
            what="the updater line's floor",
        )

    def accept(self, manifest_version: int, signer: str) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.save(self.load().raised(manifest_version, signer))
