"""Plain text: what a person types and another reads, without control characters.

Names, labels and reasons are shown on terminals (`nachtwacht agent status`, the command line) and
in the panel. A control character there is obeyed rather than read: an escape sequence can rewrite
an admin's terminal or hide the rest of a line. So text a person gives is refused when it holds
any of Unicode's control characters (category Cc: C0, DEL and C1). The panel shows each one it
quotes back as U+FFFD, and the contract's field patterns say the same for requests.

The bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069) are obeyed
too, by whatever lays the line out: after "Mallory" + U+202E the rest of the line reads backwards.
No name needs one (its direction follows from its letters) and neither does a reason a person
types, so names and reasons are refused with one as well (`first_bidi_control`, the service's
422 naming the field and the character).

Text an agent sends — the error of a run, of an unreachable report, the versions it reports — is
what it saw, and must never be lost to a refusal. It is kept, made inert where it is stored
(`inert`): each control character but newline and tab (an escape sequence, a NUL PostgreSQL's
text cannot hold), each bidirectional control and each lone surrogate becomes its visible escape,
`\\u001b`, so every reader (the panel, the command line, the trail, the API's answers and
webhooks) gets the same harmless text. A row stored before that (or written by SQL) is made
inert again on the way out (`inert_values`): the API's every JSON answer
(`control_plane.api.answers`), every webhook, the command line and the logs.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "BIDI_CONTROLS",
    "BIDI_CONTROL_CHARACTERS",
    "CONTROL_CHARACTERS",
    "PLAIN_TEXT_PATTERN",
    "REASON_PATTERN",
    "clipped",
    "first_bidi_control",
    "first_control_character",
    "inert",
    "inert_values",
    "shown",
    "surrogates_escaped",
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


# The bidirectional embeddings, overrides and isolates: U+202A-U+202E and U+2066-U+2069; as a
# regular-expression class body, in escapes, and as characters.
BIDI_CONTROL_CHARACTERS = r"\u202a-\u202e\u2066-\u2069"
BIDI_CONTROLS = frozenset(chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
# A reason a person types: no control character and no bidirectional control. The API's document
# states it; the services refuse a reason outside it (a 422 naming the field and the character).
REASON_PATTERN = rf"^[^{CONTROL_CHARACTERS}{BIDI_CONTROL_CHARACTERS}]*$"


def first_bidi_control(text: str) -> str | None:
    """The first bidirectional embedding, override or isolate in `text`, None when it has none."""
    return next((character for character in text if character in BIDI_CONTROLS), None)


# What an agent's text keeps as it is among the control characters: it reads as a line break or
# a gap, and moves no cursor anywhere else.
_KEPT_CONTROLS = frozenset("\n\t")


def _obeyed(character: str) -> bool:
    """Whether `character` is written as its escape in an agent's text (`inert`)."""
    if _is_control(character):
        return character not in _KEPT_CONTROLS
    return character in BIDI_CONTROLS or 0xD800 <= ord(character) <= 0xDFFF


# The characters `_obeyed` names, as one class: a text without any of them is inert already.
_OBEYED_PATTERN = re.compile(
    rf"(?![\n\t])[{CONTROL_CHARACTERS}{BIDI_CONTROL_CHARACTERS}\ud800-\udfff]"
)


def inert(text: str, limit: int | None = None) -> str:
    """`text` as it is stored when an agent sent it: each control character but newline and tab,
    each bidirectional control and each lone surrogate written as its visible escape (`\\u001b`,
    six characters). Within `limit` characters when one is given: a text the escapes make longer
    is cut before the escape or character that would pass it, and ends with an ellipsis."""
    if (limit is None or len(text) <= limit) and _OBEYED_PATTERN.search(text) is None:
        return text
    pieces = [f"\\u{ord(c):04x}" if _obeyed(c) else c for c in text]
    escaped = "".join(pieces)
    if limit is None or len(escaped) <= limit:
        return escaped
    kept: list[str] = []
    size = 0
    for piece in pieces:
        if size + len(piece) > limit - 1:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + "…"


def inert_values(value: Any) -> Any:
    """`value` (decoded JSON: objects, lists, texts, numbers) with each text in it `inert`, the
    keys of its objects too: what a JSON answer or a webhook carries of stored text."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {inert_values(key): inert_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [inert_values(item) for item in value]
    return value


def surrogates_escaped(value: object) -> object:
    """`value` with each lone surrogate written as its escape (`\\udcff`) when it is a text, else
    as it is: a text a program decoded with `surrogateescape` (a file name that is not UTF-8)
    becomes one that can be encoded, and stored, at all."""
    if not isinstance(value, str) or not any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        return value
    return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)


def shown(text: str) -> str:
    """`text` to quote back to a reader: each control character and bidirectional control as
    U+FFFD, seen, not obeyed."""
    return "".join(
        "\ufffd" if _is_control(character) or character in BIDI_CONTROLS else character
        for character in text
    )


def clipped(text: str, limit: int) -> str:
    """`text` within `limit` characters: a longer one cut to end with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
