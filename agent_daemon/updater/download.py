"""Fetching the artifact: streamed to `staging/<sha256>.part`, hashed while it arrives, cut off
hard at the signed `length`, bounded by a read timeout and one overall deadline, resumed with
`Range` + `If-Range` after an interruption, started over when the server ignores the range.

The deadline bounds the whole exchange — connect, response head and body — not only the gaps
between body chunks: a watchdog shuts the connection's socket down when it passes, which wakes a
read blocked anywhere, so a server that never finishes its head cannot hold the worker.

Everything the server sends is untrusted: `Content-Length`, `Content-Range` and `ETag` are read with
strict, bounded ASCII grammars (an absurd value is a `DownloadFailed`, never a `ValueError`), the
body is taken as the raw stored bytes (no content decoding, so a "gzip" answer cannot inflate), and
an ETag is kept for `If-Range` only when it is a plain strong validator.

A failure leaves at most a resumable `.part` (bytes proven wrong are deleted). Success leaves
`staging/<sha256>.tar.gz` whose length and SHA-256 are the signed ones.
"""

from __future__ import annotations

import hashlib
import os
import queue
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

import httpcore
import httpx
from pydantic import ValidationError

from agent_daemon.errors import (
    ArtifactMismatch,
    DownloadFailed,
    DownloadRefused,
    DownloadStalled,
    DownloadTooLong,
    DownloadUnavailable,
    NotEnoughDisk,
)
from ground.contract import ErrorAnswer

__all__ = [
    "ArtifactSpec",
    "DownloadLimits",
    "check_free_space",
    "clean_staging",
    "download_artifact",
    "final_path",
    "part_path",
]

# Bounded ASCII digits: a 5,000-digit number must be a refusal, not Python's int() limit.
_DIGITS = "[0-9]{1,19}"
_CONTENT_RANGE = re.compile(rf"bytes ({_DIGITS})-({_DIGITS})/({_DIGITS}|\*)")
_CONTENT_LENGTH = re.compile(_DIGITS)
# A strong entity tag (RFC 9110 8.8.3) of printable ASCII; a weak one cannot serve If-Range.
_ETAG = re.compile(r'"[\x21\x23-\x7e]{0,200}"')
# An error answer is read only this far: enough for the contract's `{"detail": {"code": …}}`.
_ERROR_BODY_BYTES = 8192
# What the download's own connection reads from its socket at once (httpcore's default is 64
# KiB): every read is a `settimeout`, a `recv`, an h11 event and a chunk through the loop below,
# so a 22 MB build took ~340 of them. A read returns what has arrived, up to this: a trickle
# still comes in small chunks and meets the deadline check.
_READ_BYTES = 1024 * 1024


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


class _WrittenBehind:
    """Writes and hashes the body's chunks in two threads of their own while the next ones arrive.

    hashlib and file writes release the GIL, so the SHA-256 of a 22 MB build (~11 ms here), its
    copies into the page cache and their way to the disk overlap the network and each other
    instead of following every chunk (docs/agent_updater.md, the download benchmark). At most
    `_AHEAD` batches wait in each, so a slow disk holds the download back rather than filling
    memory. A write error is raised to the reading side at its next chunk; `close` waits until
    every batch is written and hashed.
    """

    # Chunks (the connection's reads, up to `_READ_BYTES`; 64 KiB before) are handed over in
    # batches of about 1 MiB: a hand-over per 64 KiB chunk woke a thread 340 times for a 22 MB
    # build, each wake-up a GIL hand-off that cost more than the write it carried.
    _BATCH = 1024 * 1024
    _AHEAD = 4
    # The bytes are made durable as they arrive, a few MiB at a time, so the fsync that ends the
    # download finds little left to write: the disk's work overlaps the network's.
    _SYNC_EVERY = 4 * 1024 * 1024

    def __init__(self, sink: BinaryIO, progress: _Progress) -> None:
        self._sink = sink
        self._digest = progress.digest
        self._to_write: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=self._AHEAD)
        self._to_hash: queue.Queue[list[bytes] | None] = queue.Queue(maxsize=self._AHEAD)
        self._batch: list[bytes] = []
        self._batched = 0
        self._error: BaseException | None = None
        self._unsynced = 0
        self._threads = [
            threading.Thread(target=self._drain, args=(queue_, work), name=name, daemon=True)
            for queue_, work, name in (
                (self._to_write, self._write, "download-writer"),
                (self._to_hash, self._hash, "download-hasher"),
            )
        ]
        for thread in self._threads:
            thread.start()

    def _write(self, batch: list[bytes]) -> None:
        for chunk in batch:
            self._sink.write(chunk)
            self._unsynced += len(chunk)
        if self._unsynced >= self._SYNC_EVERY:
            self._sink.flush()
            os.fdatasync(self._sink.fileno())
            self._unsynced = 0

    def _hash(self, batch: list[bytes]) -> None:
        for chunk in batch:
            self._digest.update(chunk)

    def _drain(
        self, batches: queue.Queue[list[bytes] | None], work: Callable[[list[bytes]], None]
    ) -> None:
        while (batch := batches.get()) is not None:
            if self._error is not None:
                continue  # keep taking batches, so the reading side never blocks on a dead thread
            try:
                work(batch)
            except BaseException as exc:  # handed to the reading side, which raises it
                self._error = exc

    def put(self, chunk: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._batch.append(chunk)
        self._batched += len(chunk)
        if self._batched >= self._BATCH:
            self._hand_over()

    def _hand_over(self) -> None:
        if self._batch:
            self._to_write.put(self._batch)
            self._to_hash.put(self._batch)
            self._batch, self._batched = [], 0

    def close(self) -> None:
        self._hand_over()
        self._to_write.put(None)
        self._to_hash.put(None)
        for thread in self._threads:
            thread.join()
        if self._error is not None:
            raise self._error


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


def _shown_url(url: str) -> str:
    return url if len(url) <= 120 else url[:117] + "..."


def _stored_etag(staging: Path, sha256: str) -> str:
    """The ETag the `.part` came with, when it is one we would have stored; else our own."""
    try:
        kept = _etag_path(staging, sha256).read_bytes()[:256].decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        kept = ""
    return kept if _ETAG.fullmatch(kept) else f'"{sha256}"'


class _Watchdog:
    """One deadline over the whole exchange. httpx times each socket operation on its own, so a
    server that sends its head one byte per read timeout is never cut off by them; at the deadline
    this shuts down every socket the request connected (learned from httpcore's trace events),
    which wakes a read blocked in any phase with an end of stream."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._timer.cancel()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        # "connection.…" directly or through an HTTP proxy, "socks_proxy.…" through a SOCKS one.
        if not event.endswith("connect_tcp.complete"):
            return
        stream = info.get("return_value")
        try:
            connected = stream.get_extra_info("socket") if stream is not None else None
        except Exception:  # a backend without sockets: nothing to watch
            connected = None
        if isinstance(connected, socket.socket):
            with self._lock:
                self._sockets.append(connected)
                if self.expired:
                    _shut(connected)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for connected in self._sockets:
                _shut(connected)


def _shut(connected: socket.socket) -> None:
    with suppress(OSError):  # already closed
        connected.shutdown(socket.SHUT_RDWR)


def _discard(staging: Path, sha256: str) -> None:
    part_path(staging, sha256).unlink(missing_ok=True)
    _etag_path(staging, sha256).unlink(missing_ok=True)


def _finish(spec: ArtifactSpec, staging: Path, progress: _Progress) -> Path:
    found = progress.digest.hexdigest()
    if progress.size != spec.length or found != spec.sha256:
        _discard(staging, spec.sha256)
        raise ArtifactMismatch(
            f"release refused: the artifact from {_shown_url(spec.url)} is {progress.size} bytes "
            f"with sha256 "
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
    send_credential: bool = True,
    on_progress: Callable[[str, float, float], None] | None = None,
) -> Path:
    """`staging/<sha256>.tar.gz`, holding exactly the signed bytes; raises a DownloadFailed or
    ArtifactMismatch otherwise. Without `send_credential` the client's Authorization header is
    left off the request (`artifact_source` decides)."""
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
    # close: a connection of its own, which the deadline's watchdog can see and shut.
    headers = {"Accept-Encoding": "identity", "Connection": "close"}
    if progress.size:
        # If-Range: the server sends the rest only while it is the same artifact, else all of it.
        headers |= {
            "Range": f"bytes={progress.size}-",
            "If-Range": _stored_etag(staging, spec.sha256),
        }
    timeout = httpx.Timeout(limits.read_timeout, connect=min(limits.read_timeout, limits.deadline))
    shown = _shown_url(spec.url)
    started = time.monotonic()
    with _Watchdog(limits.deadline) as watchdog:
        try:
            request = client.build_request(
                "GET", spec.url, headers=headers, timeout=timeout,
                extensions={"trace": watchdog.trace},
            )  # fmt: skip
            if not send_credential:
                request.headers.pop("Authorization", None)
            response = client.send(request, stream=True)
            try:
                progress = _accept(response, spec, staging, progress)
                with part.open("ab" if progress.size else "wb") as sink:
                    try:
                        _copy_body(response, sink, spec, progress, started, limits, on_progress)
                    finally:
                        sink.flush()
                        os.fsync(sink.fileno())
            finally:
                response.close()
        except DownloadTooLong:
            _discard(staging, spec.sha256)
            raise
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, ValueError) as exc:
            # ValueError: what the HTTP stack raises for an answer it cannot read at all.
            if watchdog.expired:
                raise DownloadStalled(
                    f"download of {shown} ran past its deadline of {limits.deadline:g} s "
                    f"({progress.size} of {spec.length} bytes); the partial download is kept to "
                    "resume"
                ) from exc
            if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
                raise DownloadUnavailable(
                    f"download of {shown} failed: cannot connect ({type(exc).__name__}: "
                    f"{str(exc)[:200]}); the partial download is kept to resume"
                ) from exc
            if isinstance(exc, httpx.TimeoutException):
                raise DownloadStalled(
                    f"download of {shown} stalled: no data within {limits.read_timeout:g} s "
                    f"({type(exc).__name__}); the partial download is kept to resume"
                ) from exc
            raise DownloadFailed(
                f"download of {shown} failed ({type(exc).__name__}: {str(exc)[:200]}); "
                "the partial download is kept to resume"
            ) from exc
    return _finish(spec, staging, progress)


def _accept(
    response: httpx.Response, spec: ArtifactSpec, staging: Path, progress: _Progress
) -> _Progress:
    """Where the body continues: our bytes for a matching 206, nothing when Range was ignored."""
    if response.status_code == 206 and progress.size:
        content_range = response.headers.get("content-range", "")
        match = _CONTENT_RANGE.fullmatch(content_range)
        if (
            match is None
            or int(match.group(1)) != progress.size
            or int(match.group(2)) != spec.length - 1
            or match.group(3) not in {"*", str(spec.length)}
        ):
            # A range we did not ask for cannot be stitched onto our bytes.
            _discard(staging, spec.sha256)
            raise DownloadFailed(
                f"download of {_shown_url(spec.url)} failed: asked for bytes={progress.size}-, "
                f"the server sent Content-Range {content_range[:80]!r}; "
                "the next attempt starts over"
            )
        _check_announced(response, spec, spec.length - progress.size)
        return progress
    if response.status_code == 200:
        # The server ignored Range, or If-Range did not match: this body is the whole artifact.
        _check_announced(response, spec, spec.length)
        etag = response.headers.get("etag", "")
        if _ETAG.fullmatch(etag):
            _etag_path(staging, spec.sha256).write_text(etag)
        else:
            # No validator worth sending back: a resume then asks If-Range with our own.
            _etag_path(staging, spec.sha256).unlink(missing_ok=True)
        return _Progress()
    if response.status_code == 416:
        _discard(staging, spec.sha256)
    status = response.status_code
    code = _error_code(response)
    named = f"HTTP {status}" + (f" {code}" if code else "")
    if status >= 500:
        raise DownloadUnavailable(
            f"download of {_shown_url(spec.url)} failed: {named} (the server is unavailable); "
            "the partial download is kept to resume"
        )
    if 400 <= status < 500 and status != 416:
        raise DownloadRefused(
            f"download of {_shown_url(spec.url)} refused: {named}", status=status, code=code
        )
    raise DownloadFailed(
        f"download of {_shown_url(spec.url)} failed: {named} (expected 200, or 206 when resuming)"
    )


def _error_code(response: httpx.Response) -> str | None:
    """The contract's code of an error answer (`token_revoked`, `database_unavailable`, …), read
    from at most `_ERROR_BODY_BYTES` of it; None for any other body."""
    body = b""
    try:
        for chunk in response.iter_raw():
            body += chunk
            if len(body) >= _ERROR_BODY_BYTES:
                return None
    except (httpx.HTTPError, httpx.StreamError):
        return None
    try:
        return ErrorAnswer.model_validate_json(body).detail.code
    except (ValidationError, ValueError):
        return None


def _check_announced(response: httpx.Response, spec: ArtifactSpec, expected: int) -> None:
    announced = response.headers.get("content-length")
    if announced is None:
        return
    if not _CONTENT_LENGTH.fullmatch(announced):
        raise DownloadFailed(
            f"download of {_shown_url(spec.url)} failed: Content-Length {announced[:40]!r} is not "
            "a byte count"
        )
    if int(announced) > expected:
        raise DownloadTooLong(
            f"download of {_shown_url(spec.url)} refused: the server announces {announced} bytes, "
            f"more than the {expected} still expected of the signed length {spec.length}"
        )


def _read_bigger(response: httpx.Response) -> None:
    """Let the response's own HTTP/1.1 connection read up to `_READ_BYTES` at once. httpx and
    httpcore do not offer it, so this reaches into their streams; on any other shape (another
    version, a proxy's connection, a test transport) the default reads stay. The download has
    the connection to itself (`Connection: close`), so no other request reads with it."""
    stream = getattr(getattr(response.stream, "_stream", None), "_httpcore_stream", None)
    connection = getattr(getattr(stream, "_stream", None), "_connection", None)
    if isinstance(connection, httpcore.HTTP11Connection):
        connection.READ_NUM_BYTES = _READ_BYTES


def _copy_body(
    response: httpx.Response,
    sink: BinaryIO,
    spec: ArtifactSpec,
    progress: _Progress,
    started: float,
    limits: DownloadLimits,
    on_progress: Callable[[str, float, float], None] | None = None,
) -> None:
    # Raw: the signed bytes are the stored ones, never decoded (a gzip "encoding" cannot inflate).
    # Unsized iteration yields bytes as they arrive, so a trickle meets the deadline check.
    _read_bigger(response)
    writer = _WrittenBehind(sink, progress)
    try:
        for chunk in response.iter_raw():
            if progress.size + len(chunk) > spec.length:
                raise DownloadTooLong(
                    f"download of {_shown_url(spec.url)} refused: the server sent more than the "
                    f"signed length of {spec.length} bytes"
                )
            writer.put(chunk)
            progress.size += len(chunk)
            if on_progress is not None:
                # ("download", bytes so far, signed length): the daemon's progress lines.
                on_progress("download", progress.size, spec.length)
            if time.monotonic() - started > limits.deadline:
                raise DownloadStalled(
                    f"download of {_shown_url(spec.url)} ran past its deadline of "
                    f"{limits.deadline:g} s ({progress.size} of {spec.length} bytes); the partial "
                    "download is kept to resume"
                )
    finally:
        writer.close()
