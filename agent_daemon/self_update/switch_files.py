"""The switch's files: `key=value` lines, because the guard that reads and writes them is a POSIX
shell script that must work when the new build's Python code does not.

Every file starts with `format=1`. A reader ignores keys it does not know (a later release may add
one) and refuses a format it does not know, naming the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from agent_daemon.disk.atomic_file import write_bytes_atomically
from agent_daemon.errors import SelfUpdateError

__all__ = [
    "FILES_FORMAT",
    "MAX_START_ATTEMPTS",
    "PendingSwitch",
    "SwitchFiles",
    "SwitchRecord",
    "read_fields",
    "write_fields",
]

FILES_FORMAT = 1
# The guard's default (guard.sh, MAX_ATTEMPTS): a build that does not check in within this many
# starts of the unit is taken back.
MAX_START_ATTEMPTS = 3


@dataclass(frozen=True, kw_only=True)
class SwitchFiles:
    """The names, under `<state dir>/self-update/`."""

    directory: Path

    @classmethod
    def under(cls, state_dir: Path) -> SwitchFiles:
        return cls(directory=state_dir / "self-update")

    @property
    def pending(self) -> Path:
        return self.directory / "pending"

    @property
    def rolling(self) -> Path:
        return self.directory / "pending.rolling"

    @property
    def committing(self) -> Path:
        return self.directory / "pending.committing"

    @property
    def started(self) -> Path:
        return self.directory / "started"

    @property
    def rolled_back(self) -> Path:
        return self.directory / "rolled_back"

    @property
    def committed(self) -> Path:
        return self.directory / "committed"

    @property
    def run(self) -> Path:
        """The control plane's run a switch the daemon made belongs to, for the report of its
        outcome by whichever build learns it (the guard never reads or removes it)."""
        return self.directory / "run"


@dataclass(frozen=True, kw_only=True)
class PendingSwitch:
    """A switch not yet committed: `current` moves (or moved) from `from_version` to `to_version`;
    `previous_before` is what `previous` named before, restored with a rollback."""

    own_root: Path
    from_version: str
    to_version: str
    previous_before: str | None
    deadline: datetime
    attempts: int = 0

    def fields(self) -> dict[str, str]:
        return {
            "root": str(self.own_root),
            "from": self.from_version,
            "to": self.to_version,
            "previous_before": self.previous_before or "",
            "deadline": str(int(self.deadline.timestamp())),
            "attempts": str(self.attempts),
        }

    @classmethod
    def from_fields(cls, fields: dict[str, str], *, path: Path) -> PendingSwitch:
        try:
            deadline = datetime.fromtimestamp(int(fields["deadline"]), UTC)
            attempts = int(fields.get("attempts", "0"))
            return cls(
                own_root=Path(fields["root"]),
                from_version=fields["from"],
                to_version=fields["to"],
                previous_before=fields.get("previous_before") or None,
                deadline=deadline,
                attempts=attempts,
            )
        except KeyError as exc:
            raise SelfUpdateError(f"{path}: {exc.args[0]}: missing (expected key=value)") from exc
        except ValueError as exc:
            raise SelfUpdateError(
                f"{path}: deadline/attempts: expected whole numbers, found "
                f"{fields.get('deadline')!r}/{fields.get('attempts')!r}"
            ) from exc


@dataclass(frozen=True, kw_only=True)
class SwitchRecord:
    """What became of a switch: `rolled_back` (written by the guard) or `committed` (by the new
    build once it checked in). `reason` is set for a rollback: `exited_at_start`,
    `never_checked_in`, `crash_loop` or `switch_interrupted`."""

    outcome: str
    failed_version: str | None
    running_version: str | None
    reason: str | None
    at: datetime | None


def read_fields(path: Path) -> dict[str, str] | None:
    """The file's keys and values; None when it does not exist."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise SelfUpdateError(f"{path}: cannot be read ({exc})") from exc
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    found = fields.pop("format", None)
    if found != str(FILES_FORMAT):
        raise SelfUpdateError(
            f"{path}: format: expected {FILES_FORMAT}, found {found!r} "
            "(written by another release of the updater?)"
        )
    return fields


def write_fields(path: Path, fields: dict[str, str]) -> None:
    for key, value in fields.items():
        if "\n" in value or "=" in key:
            raise SelfUpdateError(f"{path}: {key}: {value!r} cannot be one key=value line")
    lines = [f"format={FILES_FORMAT}", *(f"{key}={value}" for key, value in fields.items())]
    write_bytes_atomically(path, ("\n".join(lines) + "\n").encode(), mode=0o600)
