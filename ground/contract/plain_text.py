"""Plain text: what a person types and another reads, without control characters.

Names, labels and reasons are shown on terminals (`nachtwacht agent status`, the command line) and
in the panel. A control character there is obeyed rather than read: an escape sequence can rewrite
an admin's terminal or hide the rest of a line. So text a person gives is refused when it holds
any of Unicode's control characters (category Cc: C0, DEL and C1). The panel shows each one it
quotes back as U+FFFD, and the contract's field patterns say the same for requests.
"""

from __future__ import annotations

__all__ = [
    "CONTROL_CHARACTERS",
    "PLAIN_TEXT_PATTERN",
    "clipped",
    "first_control_character",
    "shown",
]

# A regular-expression class body, written with escapes so schemas carry it as text.
CONTROL_CHARACTERS = r"\x00-\x1f\x7f-\x9f"
# At least one character besides spaces, and no control character.
PLAIN_TEXT_PATTERN = (
    rf"^[^{CONTROL_CHARACTERS}]*[^{CONTROL_CHARACTERS}\x20][^{CONTROL_CHARACTERS}]*$"
)


def _is_control(character: str) -> bool:
    code = ord(character)
    return code <= 0x1F or 0x7F <= code <= 0x9F


def first_control_character(text: str) -> str | None:
    """The first control character in `text`, None when it has none."""
    return next((character for character in text if _is_control(character)), None)


def shown(text: str) -> str:
    """`text` to quote back to a reader: each control character as U+FFFD, seen, not obeyed."""
    return "".join("\ufffd" if _is_control(character) else character for character in text)


def clipped(text: str, limit: int) -> str:
    """`text` within `limit` characters: a longer one cut to end with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
