"""Fetching the artifact: streamed to `staging/<sha256>.part`, hashed while it arrives, cut off
hard at the signed `length`, bounded by a read timeout and an overall deadline, resumed with
`Range` + `If-Range` after an interruption, started over when the server ignores the range.

A failure leaves at most a resumable `.part` (bytes proven wrong are deleted). Success leaves
`staging/<sha256>.tar.gz` whose length and SHA-256 are the signed ones.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from agent_daemon.errors import (
    ArtifactMismatch,
    DownloadFailed,
    DownloadStalled,
    DownloadTooLong,
    NotEnoughDisk,
)

__all__ = [
    "ArtifactSpec",
    "DownloadLimits",
    "check_free_space",
    "clean_staging",
    "download_artifact",
    "final_path",
    "part_path",
]

_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


@dataclass(frozen=True, kw_only=True)
class ArtifactSpec:
    """What the signed manifest promises about the artifact, and where to fetch it."""

    url: str
    sha256: str
    length: int
    unpacked_size: int


@dataclass(frozen=True, kw_only=True)
class DownloadLimits:
    """In real seconds (the updater converts its product-second settings with the clock)."""

    read_timeout: float
    deadline: float
    disk_reserve_bytes: int


@dataclass(kw_only=True)
class _Progress:
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


def _read_part(part: Path) -> _Progress:
    progress = _Progress()
    if part.exists():
        with part.open("rb") as stream:
            while chunk := stream.read(1024 * 1024):
                progress.add(chunk)
    return progress


def _discard(staging: Path, sha256: str) -> None:
    part_path(staging, sha256).unlink(missing_ok=True)
    _etag_path(staging, sha256).unlink(missing_ok=True)


def _finish(spec: ArtifactSpec, staging: Path, progress: _Progress) -> Path:
    found = progress.digest.hexdigest()
    if progress.size != spec.length or found != spec.sha256:
        _discard(staging, spec.sha256)
        raise ArtifactMismatch(
            f"release refused: the artifact from {spec.url} is {progress.size} bytes with sha256 "
            f"{found}, expected the signed {spec.length} bytes with sha256 {spec.sha256} "
            "(tampered, or another release's artifact)"
        )
    target = final_path(staging, spec.sha256)
    os.replace(part_path(staging, spec.sha256), target)
    _etag_path(staging, spec.sha256).unlink(missing_ok=True)
    return target


def download_artifact(
    client: httpx.Client,
    spec: ArtifactSpec,
    *,
    staging: Path,
    install_root: Path,
    limits: DownloadLimits,
) -> Path:
    """`staging/<sha256>.tar.gz`, holding exactly the signed bytes; raises a DownloadFailed or
    ArtifactMismatch otherwise."""
    staging.mkdir(parents=True, exist_ok=True)
    done = final_path(staging, spec.sha256)
    if done.exists():
        # Checked again: it may be what a crash left, and it is about to be installed.
        kept = _read_part(done)
        if (kept.size, kept.digest.hexdigest()) == (spec.length, spec.sha256):
            return done
        done.unlink()
    part = part_path(staging, spec.sha256)
    progress = _read_part(part)
    if progress.size > spec.length:
        _discard(staging, spec.sha256)
        progress = _Progress()
    if progress.size == spec.length:
        return _finish(spec, staging, progress)
    check_free_space(
        staging=staging,
        install_root=install_root,
        download_bytes=spec.length - progress.size,
        unpacked_size=spec.unpacked_size,
        reserve=limits.disk_reserve_bytes,
    )
    # identity: byte ranges and the signed length refer to the bytes as stored, not re-encoded.
    headers = {"Accept-Encoding": "identity"}
    if progress.size:
        etag_file = _etag_path(staging, spec.sha256)
        etag = etag_file.read_text().strip() if etag_file.exists() else f'"{spec.sha256}"'
        # If-Range: the server sends the rest only while it is the same artifact, else all of it.
        headers |= {"Range": f"bytes={progress.size}-", "If-Range": etag}
    timeout = httpx.Timeout(limits.read_timeout, connect=min(limits.read_timeout, limits.deadline))
    started = time.monotonic()
    try:
        with client.stream("GET", spec.url, headers=headers, timeout=timeout) as response:
            progress = _accept(response, spec, staging, progress)
            with part.open("ab" if progress.size else "wb") as sink:
                try:
                    _copy_body(response, sink, spec, progress, started, limits)
                finally:
                    sink.flush()
                    os.fsync(sink.fileno())
    except DownloadTooLong:
        _discard(staging, spec.sha256)
        raise
    except httpx.TimeoutException as exc:
        raise DownloadStalled(
            f"download of {spec.url} stalled: no data within {limits.read_timeout:g} s "
            f"({type(exc).__name__}); the partial download is kept to resume"
        ) from exc
    except httpx.HTTPError as exc:
        raise DownloadFailed(
            f"download of {spec.url} failed ({type(exc).__name__}: {exc}); "
            "the partial download is kept to resume"
        ) from exc
    return _finish(spec, staging, progress)


def _accept(
    response: httpx.Response, spec: ArtifactSpec, staging: Path, progress: _Progress
) -> _Progress:
    """Where the body continues: our bytes for a matching 206, nothing when Range was ignored."""
    if response.status_code == 206 and progress.size:
        match = _CONTENT_RANGE.fullmatch(response.headers.get("content-range", ""))
        if match is None or int(match.group(1)) != progress.size:
            # A range we did not ask for cannot be stitched onto our bytes.
            _discard(staging, spec.sha256)
            raise DownloadFailed(
                f"download of {spec.url} failed: asked for bytes={progress.size}-, the server "
                f"sent Content-Range {response.headers.get('content-range')!r}; "
                "the next attempt starts over"
            )
        _check_announced(response, spec, spec.length - progress.size)
        return progress
    if response.status_code == 200:
        # The server ignored Range, or If-Range did not match: this body is the whole artifact.
        _check_announced(response, spec, spec.length)
        etag = response.headers.get("etag")
        if etag:
            _etag_path(staging, spec.sha256).write_text(etag)
        return _Progress()
    if response.status_code == 416:
        _discard(staging, spec.sha256)
    raise DownloadFailed(
        f"download of {spec.url} failed: HTTP {response.status_code} "
        "(expected 200, or 206 when resuming)"
    )


def _check_announced(response: httpx.Response, spec: ArtifactSpec, expected: int) -> None:
    announced = response.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > expected:
        raise DownloadTooLong(
            f"download of {spec.url} refused: the server announces {announced} bytes, more than "
            f"the {expected} still expected of the signed length {spec.length}"
        )


def _copy_body(
    response: httpx.Response,
    sink: BinaryIO,
    spec: ArtifactSpec,
    progress: _Progress,
    started: float,
    limits: DownloadLimits,
) -> None:
    # Unsized iteration yields bytes as they arrive, so a trickle meets the deadline check.
    for chunk in response.iter_bytes():
        if progress.size + len(chunk) > spec.length:
            raise DownloadTooLong(
                f"download of {spec.url} refused: the server sent more than the signed length "
                f"of {spec.length} bytes"
            )
        sink.write(chunk)
        progress.add(chunk)
        if time.monotonic() - started > limits.deadline:
            raise DownloadStalled(
                f"download of {spec.url} ran past its deadline of {limits.deadline:g} s "
                f"({progress.size} of {spec.length} bytes); the partial download is kept to resume"
            )
