"""A whole number written by a person or a file: ASCII digits and nothing else.

Python's `str.isdigit` is true for superscripts and other scripts' digits (`²`, `٣`), and `int`
takes those digits, surrounding spaces, a sign and `1_0`; a check with one and a read with the
other lets through what the read then refuses with an exception. Every number nachtwacht reads
from text outside its own code (a command's option, a name in a folder, a file's line) is read
here: stdlib only, so every part may import it.
"""

from __future__ import annotations

__all__ = ["decimal_number", "integer", "whole_number"]


def whole_number(text: str, *, max_digits: int = 19) -> int | None:
    """The number `text` writes as 1 to `max_digits` ASCII digits, else None (no sign, no space,
    no `_`; a leading zero is taken). The default is as long as the largest 64-bit number: a
    caller bounds the value itself."""
    if not (0 < len(text) <= max_digits and text.isascii() and text.isdigit()):
        return None
    return int(text)


def integer(text: str, *, max_digits: int = 19) -> int | None:
    """`whole_number` with an optional leading `-`, for a value whose range its reader checks
    and words itself."""
    number = whole_number(text.removeprefix("-"), max_digits=max_digits)
    if number is None:
        return None
    return -number if text.startswith("-") else number


def decimal_number(text: str, *, max_digits: int = 19) -> float | None:
    """`whole_number` with an optional decimal point between digits (`2.5`), for a duration a
    person writes; at most `max_digits` digits in all, else None (no exponent, no `nan` or `inf`,
    no `.5` or `5.`). The caller bounds the value itself."""
    whole, point, fraction = text.partition(".")
    if whole_number(whole, max_digits=max_digits) is None:
        return None
    if point and whole_number(fraction, max_digits=max_digits - len(whole)) is None:
        return None
    return float(text)
