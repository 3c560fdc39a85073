"""What the signer learns from an agent build: its length, SHA-256 and unpacked size, after checking
that it is a tar.gz whose root holds an executable `bin/provibr-agent` and that every member passes
the rules the agent unpacks with (`build_archive.lint_build`): a build a host would refuse is
refused here, once, before it is signed.

An updater build (`product` "updater") is the offline bundle `bin/package` makes: one folder
holding an executable `install.sh` beside the wheels; it is checked for that instead."""

from __future__ import annotations

import hashlib
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from signed_release.build_archive import BuildRefused, lint_build, read_members
from signed_release.errors import ArtifactError

__all__ = [
    "AGENT_ENTRY_POINT",
    "MAX_BUILD_BYTES",
    "UPDATER_ENTRY_POINT",
    "ArtifactFacts",
    "describe_artifact",
]

AGENT_ENTRY_POINT = "bin/provibr-agent"
# In the bundle's one top folder (nachtwacht-agent-bundle-<v>-linux-<arch>/install.sh).
UPDATER_ENTRY_POINT = "install.sh"
# The largest build the platform takes (docs/releases.md says why): `sign` refuses a longer one
# before reading it, and so does the control plane at both publishing doors
# (`control_plane.releases.services`), whose API body is sized from it (`api/limits.py`).
MAX_BUILD_BYTES = 96 * 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class ArtifactFacts:
    length: int
    sha256: str
    unpacked_size: int


def describe_artifact(path: Path, *, product: str = "agent") -> ArtifactFacts:
    digest = hashlib.sha256()
    length = 0
    try:
        _check_regular_file(path)
        _check_size(path, path.stat().st_size)
        with path.open("rb") as stream:
            while chunk := stream.read(1024 * 1024):
                digest.update(chunk)
                length += len(chunk)
                _check_size(path, length)  # a file still being written grows as it is read
        with tarfile.open(path, mode="r:gz") as archive:
            entries = lint_build(read_members(archive))
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except BuildRefused as exc:
        raise BuildRefused(f"{path}: {exc}") from exc
    except (tarfile.TarError, EOFError) as exc:
        raise ArtifactError(f"{path}: not a tar.gz archive ({exc})") from exc
    if product == "updater":
        entry = next(
            (
                e
                for e in entries
                if len(e.path.parts) == 2
                and e.path.name == UPDATER_ENTRY_POINT
                and e.kind == "file"
            ),
            None,
        )
        wanted = f"FOLDER/{UPDATER_ENTRY_POINT}"
        what = "an updater build: the offline bundle"
    else:
        entry = next(
            (e for e in entries if str(e.path) == AGENT_ENTRY_POINT and e.kind == "file"),
            None,
        )
        wanted, what = AGENT_ENTRY_POINT, "an agent build"
    if entry is None:
        raise ArtifactError(f"{path}: holds no regular file {wanted} (expected {what})")
    if not entry.executable:
        assert entry.member is not None
        raise ArtifactError(f"{path}: {entry.path} is not executable (mode {entry.member.mode:o})")
    unpacked = sum(e.size for e in entries)
    return ArtifactFacts(length=length, sha256=digest.hexdigest(), unpacked_size=unpacked)


def _check_size(path: Path, size: int) -> None:
    if size > MAX_BUILD_BYTES:
        raise ArtifactError(
            f"{path}: is {size} bytes, larger than the largest build the platform takes"
            f" ({MAX_BUILD_BYTES} bytes)"
        )


def _check_regular_file(path: Path) -> None:
    """A build is a file: a device (`/dev/zero`) would be hashed for ever and a named pipe with no
    writer would never open, so neither is opened."""
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        kind = (
            "a directory"
            if stat.S_ISDIR(mode)
            else "a named pipe"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
        )
        raise ArtifactError(
            f"{path}: is not a regular file but {kind} (expected the build's .tar.gz)"
        )
