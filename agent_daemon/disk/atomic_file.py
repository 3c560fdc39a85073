"""Durable small files: versioned JSON written atomically.

A reader sees the old file or the new one, never half of one, even when the power goes: the bytes go
to a temporary file beside the target, are fsynced, renamed over the target with `os.replace`, and
the directory is fsynced so the rename itself survives. Every file carries `format_version`; a file
written by newer code is refused with an explanation instead of being misread.

Across releases (the updater switches to a build of itself and may switch back): every file here
must be read by the release before and the release after the one that wrote it.
- A release may add a field only as an optional one whose absence means what it meant before;
  readers ignore fields they do not know (the daemon's and the updater's state, the outbox, the
  config cache), so the release before reads the file, dropping the field if it rewrites it.
- `format_version` goes up only for a change the release before must not misread (a field whose
  meaning changes, one that becomes required); that release then refuses the file, as below: a
  release that raises it cannot be switched back from without losing the file.
The previous release's files are held by a test (tests/rolling).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from agent_daemon.errors import DaemonStateError
from ground.planted_files import NotRegularFile, read_regular

__all__ = [
    "MAX_STATE_FILE_BYTES",
    "VersionedModelFile",
    "fsync_directory",
    "read_versioned_json",
    "write_bytes_atomically",
    "write_versioned_json",
]

# The most a state file the agent writes holds: the largest, the config cache, keeps one answer
# of at most 1 MiB, indented. A larger file was not written by the agent and is not read whole.
MAX_STATE_FILE_BYTES = 16 * 1024 * 1024


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_bytes_atomically(path: Path, data: bytes, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_versioned_json(path: Path, payload: dict[str, Any], *, format_version: int) -> None:
    document = {"format_version": format_version, **payload}
    data = json.dumps(document, indent=2, sort_keys=True).encode() + b"\n"
    write_bytes_atomically(path, data)


def read_versioned_json(path: Path, *, format_version: int) -> dict[str, Any] | None:
    """The file's fields without `format_version`; None when the file does not exist.

    Only a regular file is read, and at most `MAX_STATE_FILE_BYTES` of it: the state directory may
    be the daemon's own user's while root runs `status` or `diagnose`, so a link planted there is
    not followed (to a file of root's), a named pipe is not waited on, and a huge file is not read
    into memory."""
    try:
        raw = read_regular(path, MAX_STATE_FILE_BYTES, follow_links=False)
    except FileNotFoundError:
        return None
    except NotRegularFile as exc:
        raise DaemonStateError(f"{path}: {exc.strerror}") from exc
    except OSError as exc:
        raise DaemonStateError(f"{path}: cannot be read ({exc.strerror})") from exc
    if len(raw) > MAX_STATE_FILE_BYTES:
        raise DaemonStateError(
            f"{path}: larger than {MAX_STATE_FILE_BYTES} bytes, more than the agent writes there"
        )
    try:
        document = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DaemonStateError(f"{path}: is not valid JSON ({exc})") from exc
    if not isinstance(document, dict):
        raise DaemonStateError(f"{path}: expected a JSON object, found {type(document).__name__}")
    found = document.pop("format_version", None)
    if not isinstance(found, int) or isinstance(found, bool):
        raise DaemonStateError(f"{path}: format_version: {found!r} is not an integer")
    if found > format_version:
        raise DaemonStateError(
            f"{path}: format_version {found} was written by a newer nachtwacht agent "
            f"(this one understands up to {format_version}); upgrade the agent or move the file"
        )
    if found < format_version:
        raise DaemonStateError(
            f"{path}: format_version {found} is older than {format_version} and has no migration"
        )
    return document


ModelT = TypeVar("ModelT", bound=BaseModel)


class VersionedModelFile(Generic[ModelT]):
    """One pydantic model kept in a versioned JSON file; a missing file is the model's defaults."""

    def __init__(self, path: Path, model: type[ModelT], *, format_version: int, what: str) -> None:
        self.path = path
        self._model = model
        self._format_version = format_version
        self._what = what

    def load(self) -> ModelT:
        document = read_versioned_json(self.path, format_version=self._format_version)
        if document is None:
            return self._model()
        try:
            return self._model.model_validate(document)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise DaemonStateError(f"{self.path}: not a usable {self._what} ({problems})") from exc

    def save(self, state: ModelT) -> None:
        write_versioned_json(
            self.path, state.model_dump(mode="json"), format_version=self._format_version
        )
