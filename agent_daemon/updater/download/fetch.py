"""Fetching the artifact: streamed to `staging/<sha256>.part`, hashed while it arrives, cut off
hard at the signed `length`, bounded by a read timeout and one overall deadline, resumed with
`Range` + `If-Range` after an interruption, started over when the server ignores the range.

This module holds the exchange itself: the request, where the answer's body continues, the copy of
the body with its length limit and progress, the failures mapped to the agent's errors, and the
final check; the files and the headers are its siblings in this package, the deadline's watchdog
is `agent_daemon.connection.deadline`.

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

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import httpx

from agent_daemon.connection.deadline import OWN_CONNECTION, Watchdog
from agent_daemon.connection.wire import looks_like_html
from agent_daemon.errors import (
    ArtifactMismatch,
    DownloadFailed,
    DownloadRefused,
    DownloadStalled,
    DownloadTooLong,
    DownloadUnavailable,
)
from agent_daemon.updater.download.answer import (
    check_announced,
    error_code,
    range_continues,
    shown_url,
)
from agent_daemon.updater.download.staging import (
    Received,
    check_free_space,
    discard,
    final_path,
    forget_etag,
    part_path,
    read_part,
    remember_etag,
    stored_etag,
)
from agent_daemon.updater.update_records import OnProgress
from ground.contract.plain_text import clipped, shown

__all__ = ["GZIP_MAGIC", "ArtifactSpec", "DownloadLimits", "download_artifact"]

# The first bytes of every gzip stream (RFC 1952), so of every build's `.tar.gz`.
GZIP_MAGIC = b"\x1f\x8b"
# Said of an answer that is plainly not the artifact: it says nothing of the release.
_IN_THE_WAY = "answered where the build was expected: a proxy or captive portal in the way?"


@dataclass(frozen=True, kw_only=True)
class ArtifactSpec:
    """What the signed manifest promises about the artifact, and where to fetch it."""

    url: str
    sha256: str
    length: int
    unpacked_size: int
    # A build's `.tar.gz` (a patch is not): bytes that are not the signed ones and not even a
    # gzip stream are plainly not the build, a download that failed rather than a tampered one.
    gzip: bool = False


@dataclass(frozen=True, kw_only=True)
class DownloadLimits:
    """In real seconds (the updater converts its product-second settings with the clock)."""

    read_timeout: float
    deadline: float
    disk_reserve_bytes: int


def download_artifact(
    client: httpx.Client,
    spec: ArtifactSpec,
    *,
    staging: Path,
    install_root: Path,
    limits: DownloadLimits,
    send_credential: bool = True,
    on_progress: OnProgress | None = None,
) -> Path:
    """`staging/<sha256>.tar.gz`, holding exactly the signed bytes; raises a DownloadFailed or
    ArtifactMismatch otherwise. Without `send_credential` the client's Authorization header is
    left off the request (`artifact_source` decides)."""
    staging.mkdir(parents=True, exist_ok=True)
    kept = _kept_from_before(spec, staging)
    if isinstance(kept, Path):
        return kept
    received = kept
    if received.size == spec.length:
        return _finish(spec, staging, received)
    check_free_space(
        staging=staging,
        install_root=install_root,
        download_bytes=spec.length - received.size,
        unpacked_size=spec.unpacked_size,
        reserve=limits.disk_reserve_bytes,
    )
    timeout = httpx.Timeout(limits.read_timeout, connect=min(limits.read_timeout, limits.deadline))
    started = time.monotonic()
    with Watchdog(limits.deadline) as watchdog:
        try:
            request = client.build_request(
                "GET", spec.url, headers=_request_headers(spec, staging, received),
                timeout=timeout, extensions={"trace": watchdog.trace},
            )  # fmt: skip
            if not send_credential:
                request.headers.pop("Authorization", None)
            response = client.send(request, stream=True)
            try:
                received = _accept(response, spec, staging, received)
                with part_path(staging, spec.sha256).open("ab" if received.size else "wb") as sink:
                    try:
                        _copy_body(response, sink, spec, received, started, limits, on_progress)
                    finally:
                        sink.flush()
                        os.fsync(sink.fileno())
            finally:
                response.close()
        except DownloadTooLong:
            discard(staging, spec.sha256)
            raise
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, ValueError) as exc:
            # ValueError: what the HTTP stack raises for an answer it cannot read at all.
            raise _transport_failure(exc, spec, received, limits, watchdog.expired) from exc
    return _finish(spec, staging, received)


def _kept_from_before(spec: ArtifactSpec, staging: Path) -> Path | Received:
    """What an earlier attempt left: the finished file when it still holds the signed bytes,
    else the part to resume from (empty when there is none or it is longer than the artifact)."""
    done = final_path(staging, spec.sha256)
    if done.exists():
        # Checked again: it may be what a crash left, and it is about to be installed.
        kept = read_part(done)
        if (kept.size, kept.digest.hexdigest()) == (spec.length, spec.sha256):
            return done
        done.unlink()
    received = read_part(part_path(staging, spec.sha256))
    if received.size > spec.length:
        discard(staging, spec.sha256)
        return Received()
    return received


def _request_headers(spec: ArtifactSpec, staging: Path, received: Received) -> dict[str, str]:
    # identity: byte ranges and the signed length refer to the bytes as stored, not re-encoded.
    # close: a connection of its own, which the deadline's watchdog can see and shut.
    headers = {"Accept-Encoding": "identity", **OWN_CONNECTION}
    if received.size:
        # If-Range: the server sends the rest only while it is the same artifact, else all of it.
        headers |= {
            "Range": f"bytes={received.size}-",
            "If-Range": stored_etag(staging, spec.sha256),
        }
    return headers


def _transport_failure(
    exc: Exception, spec: ArtifactSpec, received: Received, limits: DownloadLimits, expired: bool
) -> DownloadFailed:
    """The download's failure as the agent reports it; the partial file stays to resume."""
    shown = shown_url(spec.url)
    if expired:
        return DownloadStalled(
            f"download of {shown} ran past its deadline of {limits.deadline:g} s "
            f"({received.size} of {spec.length} bytes); the partial download is kept to resume"
        )
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return DownloadUnavailable(
            f"download of {shown} failed: cannot connect ({type(exc).__name__}: "
            f"{str(exc)[:200]}); the partial download is kept to resume"
        )
    if isinstance(exc, httpx.TimeoutException):
        return DownloadStalled(
            f"download of {shown} stalled: no data within {limits.read_timeout:g} s "
            f"({type(exc).__name__}); the partial download is kept to resume"
        )
    return DownloadFailed(
        f"download of {shown} failed ({type(exc).__name__}: {str(exc)[:200]}); "
        "the partial download is kept to resume"
    )


def _finish(spec: ArtifactSpec, staging: Path, received: Received) -> Path:
    found = received.digest.hexdigest()
    if received.size != spec.length or found != spec.sha256:
        begins = _first_bytes(part_path(staging, spec.sha256))
        discard(staging, spec.sha256)
        if spec.gzip and not begins.startswith(GZIP_MAGIC):
            # Not the release's bytes at all (a portal's page served as a file): a download
            # that failed, tried again in the window, never a verification failure.
            if looks_like_html(begins):
                what = f"an HTML page ({received.size} bytes, not a gzip stream)"
            else:
                what = f"{received.size} bytes that are not a gzip stream"
            raise DownloadFailed(f"download of {shown_url(spec.url)} failed: {what} {_IN_THE_WAY}")
        raise ArtifactMismatch(
            f"release refused: the artifact from {shown_url(spec.url)} is {received.size} bytes "
            f"with sha256 "
            f"{found}, expected the signed {spec.length} bytes with sha256 {spec.sha256} "
            "(tampered, or another release's artifact)"
        )
    target = final_path(staging, spec.sha256)
    os.replace(part_path(staging, spec.sha256), target)
    forget_etag(staging, spec.sha256)
    return target


def _accept(
    response: httpx.Response, spec: ArtifactSpec, staging: Path, received: Received
) -> Received:
    """Where the body continues: our bytes for a matching 206, nothing when Range was ignored."""
    _refuse_what_is_not_the_artifact(response, spec)
    if response.status_code == 206 and received.size:
        content_range = response.headers.get("content-range", "")
        if not range_continues(content_range, offset=received.size, length=spec.length):
            # A range we did not ask for cannot be stitched onto our bytes.
            discard(staging, spec.sha256)
            raise DownloadFailed(
                f"download of {shown_url(spec.url)} failed: asked for bytes={received.size}-, "
                f"the server sent Content-Range {content_range[:80]!r}; "
                "the next attempt starts over"
            )
        check_announced(
            response, url=spec.url, expected=spec.length - received.size, length=spec.length
        )
        return received
    if response.status_code == 200:
        # The server ignored Range, or If-Range did not match: this body is the whole artifact.
        check_announced(response, url=spec.url, expected=spec.length, length=spec.length)
        remember_etag(staging, spec.sha256, response.headers.get("etag", ""))
        return Received()
    if response.status_code == 416:
        discard(staging, spec.sha256)
    status = response.status_code
    code = error_code(response)
    named = f"HTTP {status}" + (f" {code}" if code else "")
    if status >= 500:
        raise DownloadUnavailable(
            f"download of {shown_url(spec.url)} failed: {named} (the server is unavailable); "
            "the partial download is kept to resume"
        )
    if 400 <= status < 500 and status != 416:
        raise DownloadRefused(
            f"download of {shown_url(spec.url)} refused: {named}", status=status, code=code
        )
    raise DownloadFailed(
        f"download of {shown_url(spec.url)} failed: {named} (expected 200, or 206 when resuming)"
    )


def _refuse_what_is_not_the_artifact(response: httpx.Response, spec: ArtifactSpec) -> None:
    """A redirect (never followed) or a web page is plainly not the artifact: a failed download
    naming what answered, before a byte is stored (a `.part` from before is kept)."""
    status = response.status_code
    # The status line's phrase is the server's text: shown safely, never as it came.
    words = f"{status} {shown(clipped(response.reason_phrase, 80))}".strip()
    if 300 <= status < 400 and status != 304:
        where = response.headers.get("location")
        to = "" if where is None else f" to {shown(clipped(where, 200))}"
        answered = f"a redirect ({words}{to}, never followed)"
    elif status in {200, 206} and looks_like_html(b"", response.headers.get("content-type")):
        kind = shown(clipped(response.headers.get("content-type", ""), 80))
        answered = f"an HTML page ({words}, {kind})"
    else:
        return
    raise DownloadFailed(f"download of {shown_url(spec.url)} failed: {answered} {_IN_THE_WAY}")


def _first_bytes(path: Path, count: int = 64) -> bytes:
    try:
        with path.open("rb") as stored:
            return stored.read(count)
    except FileNotFoundError:
        return b""


def _copy_body(
    response: httpx.Response,
    sink: BinaryIO,
    spec: ArtifactSpec,
    received: Received,
    started: float,
    limits: DownloadLimits,
    on_progress: OnProgress | None = None,
) -> None:
    # Raw: the signed bytes are the stored ones, never decoded (a gzip "encoding" cannot inflate).
    # Unsized iteration yields bytes as they arrive, so a trickle meets the deadline check.
    for chunk in response.iter_raw():
        if received.size + len(chunk) > spec.length:
            raise DownloadTooLong(
                f"download of {shown_url(spec.url)} refused: the server sent more than the "
                f"signed length of {spec.length} bytes"
            )
        sink.write(chunk)
        received.add(chunk)
        if on_progress is not None:
            # ("download", bytes so far, signed length): the daemon's progress lines.
            on_progress("download", received.size, spec.length)
        if time.monotonic() - started > limits.deadline:
            raise DownloadStalled(
                f"download of {shown_url(spec.url)} ran past its deadline of "
                f"{limits.deadline:g} s ({received.size} of {spec.length} bytes); the partial "
                "download is kept to resume"
            )
