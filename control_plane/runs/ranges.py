"""`Range` and `If-Range` for the artifact download (RFC 9110 §14), one byte range at a time."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ByteRange", "Unsatisfiable", "requested_range"]

_RANGE = re.compile(r"bytes=(\d*)-(\d*)", re.ASCII)
# Offsets past this many digits are beyond any artifact (and would make `int()` slow or refuse):
# they are read as "beyond the end", never parsed.
_MAX_DIGITS = 18
# A header longer than this is no single byte range this server could mean.
_MAX_HEADER = 200


class Unsatisfiable(Exception):
    """The range lies outside the representation (answered with 416)."""


@dataclass(frozen=True, kw_only=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1


def requested_range(
    range_header: str | None, if_range: str | None, *, etag: str, size: int
) -> ByteRange | None:
    """The single range to send, or None for the whole body.

    A range whose `If-Range` validator does not match the current ETag is ignored (the client's
    partial copy is of other bytes), as is a header this server does not understand (multiple
    ranges, other units): both get the full body, which is always a correct answer.
    """
    if not range_header or len(range_header) > _MAX_HEADER:
        return None
    if if_range is not None and if_range.strip() != etag:
        return None
    match = _RANGE.fullmatch(range_header.strip())
    if match is None or (not match[1] and not match[2]):
        return None
    if not match[1]:
        suffix = _offset(match[2], size)
        if suffix == 0:
            raise Unsatisfiable
        return ByteRange(start=max(0, size - suffix), end=size - 1)
    start = _offset(match[1], size)
    if start >= size:
        raise Unsatisfiable
    end = _offset(match[2], size) if match[2] else size - 1
    if start > end:
        return None
    return ByteRange(start=start, end=min(end, size - 1))


def _offset(digits: str, size: int) -> int:
    """A byte offset from the header; anything too long to be inside the artifact is its size."""
    stripped = digits.lstrip("0") or "0"
    return size if len(stripped) > _MAX_DIGITS else int(stripped)
