"""Free text from a request, checked before any service stores it.

PostgreSQL's text cannot hold a NUL character, and a lone UTF-16 surrogate cannot even be encoded
for it: unchecked, either would fail inside the database as a 500. The API refuses both at the
door for every request (`control_plane.api.limits`); every service that stores or looks up
caller-given text passes it through `stored_text` as well, so the CLI and the panel's own calls
are held to the same rule, as a 422 naming the field.

What a person types to be read by others — a name (`plain_name`: an organisation, an agent, a
credential, a person, an OpenID client id), a label or a pattern one may leave out
(`plain_label`: an enrollment token's), an address (`plain_address`: a webhook's URL, an OpenID
issuer), a reason (`plain_text`, `required_text`) — holds no control
character and no bidirectional control either (`ground.contract.plain_text`): a 422 naming the
field and the character. This module is the one home of that rule for every door (the API, the
command line and the services the panel calls).

What an agent reports as it saw it (`agent_text`: a run's error, the versions it reports) is never
refused for what it holds: it is stored inert, each control character, bidirectional control and
lone surrogate written as its visible escape.
"""

from __future__ import annotations

from control_plane.errors import InvalidInput
from ground.contract.plain_text import first_bidi_control, first_control_character, inert

__all__ = [
    "agent_text",
    "plain_address",
    "plain_label",
    "plain_name",
    "plain_text",
    "required_text",
    "stored_text",
]


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


def agent_text(field: str, value: object, limit: int) -> str | None:
    """Text an agent reports as it saw it (None: none), as it is stored: inert
    (`ground.contract.plain_text.inert`), cut within `limit` characters."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, value, "is not a string")
    return stored_text(field, inert(value, limit), limit)


def plain_text(field: str, value: object, limit: int) -> str | None:
    """A reason a person may give (None: none given), as it is stored: `stored_text` with no
    control character and no bidirectional control (shown on the trail, in the panel and on
    the hosts it stops, one would be obeyed rather than read)."""
    text = stored_text(field, value, limit)
    if text is not None:
        _refuse_unplain(field, text, "the text after it")
    return text


def required_text(field: str, value: object, limit: int, *, required_to: str) -> str:
    """`plain_text` that must say something: missing or blank, it is refused as required to do
    what `required_to` says (a reason kept on the trail, shown to the people it stops)."""
    text = stored_text(field, value, limit)
    if text is None:  # JSON's null or left out: no value to quote (Python's `None` means nothing)
        message = f"{field}: missing; it is required to {required_to}"
        raise InvalidInput(field, value, "is required", message=message)
    if not text.strip():  # before the plain-text check: a tab or a newline alone says nothing
        raise InvalidInput(field, value, f"is required to {required_to}")
    _refuse_unplain(field, text, "the text after it")
    return text


def plain_name(field: str, value: object, limit: int) -> str:
    """A name a person gave (an organisation, an agent, a key, a person), as it is stored: spaces
    around it dropped, something besides them, at most `limit` characters and no control character
    (names are shown on terminals and in the panel, where one would be obeyed, not read), nor a
    bidirectional control."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field, value, "must be a non-empty name")
    stored_text(field, value, limit)
    _refuse_unplain(field, value, "the text after the name")
    return value.strip()


def plain_label(field: str, value: object, limit: int) -> str | None:
    """A label or a pattern a person may leave out (None: none given), as it is stored: spaces
    around it dropped, refused when blank (leave it out instead), otherwise held to `plain_name`'s
    rule (no control character, no bidirectional control)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(field, value, "is not a string")
    if not value.strip():
        raise InvalidInput(field, value, "is blank (leave it out instead)")
    stored_text(field, value, limit)
    _refuse_unplain(field, value, "the text after it")
    return value.strip()


def plain_address(field: str, value: str, limit: int) -> str:
    """An address a person typed (a URL), as it may be stored: `stored_text` with no control
    character and no bidirectional control (shown on the panel and the trail, one would be obeyed:
    "…/\u202egpj.exe" reads as "…/exe.jpg")."""
    stored_text(field, value, limit)
    _refuse_unplain(field, value, "the text after it")
    return value


def _refuse_unplain(field: str, value: str, what_turns: str) -> None:
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
            f"{what_turns} in another order)",
        )
