"""The download's files in `staging/`: the resumable `<sha256>.part` with the ETag it came with
(`<sha256>.etag`), the finished `<sha256>.tar.gz`; the bytes held so far, counted and hashed
(`Received`); the free-space check before a download starts, and the tidying that keeps only a
resumable download.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_daemon.errors import NotEnoughDisk
from agent_daemon.updater.download.answer import is_strong_etag

__all__ = [
    "Received",
    "check_free_space",
    "clean_staging",
    "discard",
    "final_path",
    "forget_etag",
    "part_path",
    "read_part",
    "remember_etag",
    "stored_etag",
]


@dataclass(kw_only=True)
class Received:
    """The artifact's bytes held so far: how many, and their running SHA-256."""

    size: int = 0
    digest: Any = field(default_factory=hashlib.sha256)

    def add(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.size += len(chunk)


def final_path(staging: Path, sha256: str) -> Path:
    return staging / f"{sha256}.tar.gz"


def part_path(staging: Path, sha256: str) -> Path:
    return staging / f"{sha256}.part"


def _etag_path(staging: Path, sha256: str) -> Path:
    return staging / f"{sha256}.etag"


def clean_staging(staging: Path, *, keep_part: str | None) -> None:
    """Remove everything but the resumable download of `keep_part` (a sha256): its bytes and the
    ETag they came with."""
    if not staging.is_dir():
        return
    keep = {f"{keep_part}.part", f"{keep_part}.etag"} if keep_part else set()
    for entry in staging.iterdir():
        if entry.name in keep:
            continue
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def check_free_space(
    *, staging: Path, install_root: Path, download_bytes: int, unpacked_size: int, reserve: int
) -> None:
    """Refuse to start unless the artifact, its unpacked build and the reserve all fit."""
    needs: dict[int, tuple[Path, int]] = {}
    for path, amount in ((staging, download_bytes), (install_root, unpacked_size)):
        device = os.stat(path).st_dev
        where, so_far = needs.get(device, (path, 0))
        needs[device] = (where, so_far + amount)
    for where, amount in needs.values():
        free = shutil.disk_usage(where).free
        if free < amount + reserve:
            raise NotEnoughDisk(
                f"not enough disk space at {where}: {free} bytes free, the update needs "
                f"{amount} plus a reserve of {reserve} bytes"
            )


def read_part(part: Path) -> Received:
    received = Received()
    if part.exists():
        with part.open("rb") as stream:
            while chunk := stream.read(1024 * 1024):
                received.add(chunk)
    return received


def stored_etag(staging: Path, sha256: str) -> str:
    """The ETag the `.part` came with, when it is one we would have stored; else our own."""
    try:
        kept = _etag_path(staging, sha256).read_bytes()[:256].decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        kept = ""
    return kept if is_strong_etag(kept) else f'"{sha256}"'


def remember_etag(staging: Path, sha256: str, etag: str) -> None:
    """Keep the ETag a whole body came with, for the `If-Range` of a resume."""
    if is_strong_etag(etag):
        _etag_path(staging, sha256).write_text(etag)
    else:
        # No validator worth sending back: a resume then asks If-Range with our own.
        _etag_path(staging, sha256).unlink(missing_ok=True)


def forget_etag(staging: Path, sha256: str) -> None:
    _etag_path(staging, sha256).unlink(missing_ok=True)


def discard(staging: Path, sha256: str) -> None:
    """Delete the bytes proven wrong, and the ETag they came with."""
    part_path(staging, sha256).unlink(missing_ok=True)
    _etag_path(staging, sha256).unlink(missing_ok=True)
