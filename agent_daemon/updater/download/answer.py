"""The artifact server's answer, read as untrusted input: `Content-Length`, `Content-Range` and
`ETag` with strict, bounded ASCII grammars (an absurd value is a `DownloadFailed` or a refusal,
never a `ValueError`), and the contract's code of an error answer from a bounded read of its body.
"""

from __future__ import annotations

import re

import httpx
from pydantic import ValidationError

from agent_daemon.errors import DownloadFailed, DownloadTooLong
from ground.contract import ErrorAnswer

__all__ = [
    "check_announced",
    "error_code",
    "is_strong_etag",
    "range_continues",
    "shown_url",
]

# Bounded ASCII digits: a 5,000-digit number must be a refusal, not Python's int() limit.
_DIGITS = "[0-9]{1,19}"
_CONTENT_RANGE = re.compile(rf"bytes ({_DIGITS})-({_DIGITS})/({_DIGITS}|\*)")
_CONTENT_LENGTH = re.compile(_DIGITS)
# A strong entity tag (RFC 9110 8.8.3) of printable ASCII; a weak one cannot serve If-Range.
_ETAG = re.compile(r'"[\x21\x23-\x7e]{0,200}"')
# An error answer is read only this far: enough for the contract's `{"detail": {"code": …}}`.
_ERROR_BODY_BYTES = 8192


def shown_url(url: str) -> str:
    return url if len(url) <= 120 else url[:117] + "..."


def is_strong_etag(value: str) -> bool:
    """Whether `value` is an ETag worth keeping for `If-Range`: strong, printable, bounded."""
    return _ETAG.fullmatch(value) is not None


def range_continues(content_range: str, *, offset: int, length: int) -> bool:
    """Whether a 206's `Content-Range` is the rest of the `length` bytes from `offset` on."""
    match = _CONTENT_RANGE.fullmatch(content_range)
    return not (
        match is None
        or int(match.group(1)) != offset
        or int(match.group(2)) != length - 1
        or match.group(3) not in {"*", str(length)}
    )


def error_code(response: httpx.Response) -> str | None:
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


def check_announced(response: httpx.Response, *, url: str, expected: int, length: int) -> None:
    """Refuse a `Content-Length` that is not a byte count, or more than the `expected` bytes still
    missing of the signed `length`."""
    announced = response.headers.get("content-length")
    if announced is None:
        return
    if not _CONTENT_LENGTH.fullmatch(announced):
        raise DownloadFailed(
            f"download of {shown_url(url)} failed: Content-Length {announced[:40]!r} is not "
            "a byte count"
        )
    if int(announced) > expected:
        raise DownloadTooLong(
            f"download of {shown_url(url)} refused: the server announces {announced} bytes, "
            f"more than the {expected} still expected of the signed length {length}"
        )
