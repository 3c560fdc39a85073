"""Free text from a request, checked before any service stores it.

PostgreSQL's text cannot hold a NUL character, and a lone UTF-16 surrogate cannot even be encoded
for it: unchecked, either would fail inside the database as a 500. The API refuses both at the
door for every request (`control_plane.api.limits`); every service that stores or looks up
caller-given text passes it through `stored_text` as well, so the CLI and the panel's own calls
are held to the same rule, as a 422 naming the field.
"""

from __future__ import annotations

from control_plane.errors import InvalidInput
from ground.contract.plain_text import first_control_character

__all__ = ["first_bidi_control", "plain_name", "required_text", "stored_text"]


def stored_text(field: str, value: object, limit: int) -> str | None:
    """`value` as it may be stored: None, or a string of at most `limit` characters without NUL."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, value, "is not a string")
    if len(value) > limit:
        raise InvalidInput(field, value[:40] + "…", f"is longer than {limit} characters")
    if "\x00" in value:
        raise InvalidInput(field, value[:40], "contains a NUL character (not storable text)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            field, value[:40], "contains a lone UTF-16 surrogate (not storable text)"
        ) from exc
    return value


def required_text(field: str, value: object, limit: int, *, required_to: str) -> str:
    """`stored_text` that must say something: missing or blank, it is refused as required to do
    what `required_to` says (a reason kept on the trail, shown to the people it stops)."""
    text = stored_text(field, value, limit)
    if text is None:  # JSON's null or left out: no value to quote (Python's `None` means nothing)
        message = f"{field}: missing; it is required to {required_to}"
        raise InvalidInput(field, value, "is required", message=message)
    if not text.strip():
        raise InvalidInput(field, value, f"is required to {required_to}")
    return text


# The bidirectional embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069). No name needs
# one: its direction follows from its letters. Shown on the trail or a page, one reorders what comes
# after the name on the line ("Mallory" + U+202E makes the rest of the line read backwards).
_BIDI_CONTROLS = frozenset(chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))


def first_bidi_control(text: str) -> str | None:
    """The first bidirectional embedding, override or isolate in `text`, None when it has none."""
    return next((character for character in text if character in _BIDI_CONTROLS), None)


def plain_name(field: str, value: object, limit: int) -> str:
    """A name a person gave (an organisation, an agent, a key, a person), as it is stored: spaces
    around it dropped, something besides them, at most `limit` characters and no control character
    (names are shown on terminals and in the panel, where one would be obeyed, not read), nor a
    bidirectional control."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, value, "must be a non-empty name")
    stored_text(field, value, limit)
    control = first_control_character(value)
    if control is not None:
        raise InvalidInput(
            field, value[:40], f"contains the control character U+{ord(control):04X} (plain text)"
        )
    bidi = first_bidi_control(value)
    if bidi is not None:
        raise InvalidInput(
            field,
            value[:40],
            f"contains the bidirectional control U+{ord(bidi):04X} (plain text: it would show "
            "the text after the name in another order)",
        )
    return value.strip()
