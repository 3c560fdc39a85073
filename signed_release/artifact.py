"""What the signer learns from an agent build: its length, SHA-256 and unpacked size, after checking
that it is a tar.gz whose root holds an executable `bin/provibr-agent`."""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass
from pathlib import Path

from signed_release.errors import ArtifactError

__all__ = ["AGENT_ENTRY_POINT", "ArtifactFacts", "describe_artifact"]

AGENT_ENTRY_POINT = "bin/provibr-agent"


@dataclass(frozen=True, kw_only=True)
class ArtifactFacts:
    length: int
    sha256: str
    unpacked_size: int


def describe_artifact(path: Path) -> ArtifactFacts:
    digest = hashlib.sha256()
    length = 0
    try:
        with path.open("rb") as stream:
            while chunk := stream.read(1024 * 1024):
                digest.update(chunk)
                length += len(chunk)
        with tarfile.open(path, mode="r:gz") as archive:
            members = archive.getmembers()
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except (tarfile.TarError, EOFError) as exc:
        raise ArtifactError(f"{path}: not a tar.gz archive ({exc})") from exc
    entry = next(
        (m for m in members if m.name.removeprefix("./") == AGENT_ENTRY_POINT and m.isfile()),
        None,
    )
    if entry is None:
        raise ArtifactError(
            f"{path}: holds no regular file {AGENT_ENTRY_POINT} (expected an agent build)"
        )
    if not entry.mode & 0o100:
        raise ArtifactError(f"{path}: {AGENT_ENTRY_POINT} is not executable (mode {entry.mode:o})")
    unpacked = sum(member.size for member in members if member.isfile())
    return ArtifactFacts(length=length, sha256=digest.hexdigest(), unpacked_size=unpacked)
