"""Agent versions: `MAJOR.MINOR.PATCH` with an optional `-prerelease`, ordered as SemVer 2.0 orders
them. The version also names the install folder (`versions/<v>/`), so the pattern admits no path
separators and no dots at either end."""

from __future__ import annotations

import re

__all__ = ["VERSION_PATTERN", "is_valid_version", "version_key"]

# A prerelease identifier is a number without leading zeros or a word with a non-digit, so that
# two different strings never compare equal.
_IDENTIFIER = r"(?:0|[1-9]\d{0,8}|\d{0,31}[A-Za-z-][0-9A-Za-z-]{0,31})"
VERSION_PATTERN = re.compile(
    r"(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})\.(0|[1-9]\d{0,8})"
    rf"(?:-({_IDENTIFIER}(?:\.{_IDENTIFIER}){{0,7}}))?",
    # `\d` is ASCII digits only: `int` reads other scripts' digits too ("1\u0663" is 13).
    re.ASCII,
)

# A release sorts after every prerelease of the same MAJOR.MINOR.PATCH.
_PreKey = tuple[int, tuple[tuple[int, int, str], ...]]
_RELEASE: _PreKey = (1, ())


def is_valid_version(value: str) -> bool:
    return VERSION_PATTERN.fullmatch(value) is not None


def version_key(value: str) -> tuple[int, int, int, _PreKey]:
    """A sort key; raises ValueError for a string that is not a version."""
    match = VERSION_PATTERN.fullmatch(value)
    if match is None:
        raise ValueError(f"{value!r} is not a version (expected MAJOR.MINOR.PATCH, e.g. 1.5.0)")
    major, minor, patch, pre = match.groups()
    if pre is None:
        return int(major), int(minor), int(patch), _RELEASE
    # Numeric identifiers sort before alphanumeric ones, numerically among themselves.
    parts = tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in pre.split("."))
    return int(major), int(minor), int(patch), (0, parts)
