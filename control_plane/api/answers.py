"""How a route declares its answers in OpenAPI: every error status it can give, with the schema
of its body, so a panel team can generate a client from `/openapi.json`.

    401, 403    `{"detail": "…"}`: the credential's refusal, a message alone (`CredentialRefusal`)
    others      `{"detail": {"code": …, "message": …}}`: the contract's `ErrorAnswer`

`errors(...)` builds a route's `responses=`; the statuses a route names are the ones its
dependencies and its service can raise (every credentialed route: 401, 403 and 503).

Every JSON answer is written by `InertJSON` (the app's default, and the config poll's), a refusal
by `refusal_response`: each text in it inert (`ground.contract.plain_text.inert_values`),
whatever the row it came from holds. An agent's text is stored inert, but a row stored before
that, or written by SQL, may hold an escape sequence, a C1 control or a bidirectional override;
the answer is where every reader (a script, an operator's `curl`) meets it, so it is made inert
there, once.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel, ConfigDict
from starlette.responses import JSONResponse, Response

from control_plane.errors import RequestRefused
from ground.contract import ErrorAnswer, ErrorDetail
from ground.contract.messages import MAX_MESSAGE_LENGTH
from ground.contract.plain_text import clipped, inert_values, shown

__all__ = [
    "AUTHENTICATED",
    "MAX_SHOWN_VALUE",
    "CredentialRefusal",
    "DownloadRefusal",
    "InertJSON",
    "bounded_message",
    "errors",
    "refusal_response",
    "shown_value",
]

# A refusal names the value it refuses, shortened to this many characters: enough to recognise
# it, never an echo of whatever size the caller sent (a 10 MB value came back whole once).
MAX_SHOWN_VALUE = 100


def _shortened(text: str) -> str:
    # Seen, not obeyed: a control character or a bidirectional control is quoted back as U+FFFD
    # (the message quotes the same value escaped), whoever prints the answer's `value`.
    text = shown(text)
    if len(text) <= MAX_SHOWN_VALUE:
        return text
    return f"{text[: MAX_SHOWN_VALUE - 1]}… ({len(text)} characters)"


def shown_value(value: Any) -> Any:
    """`value` as a refusal may show it: unchanged when short, else its shortened text; a text's
    control characters and bidirectional controls as U+FFFD."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        # NaN and the infinities have no JSON form: shown as their text, or the refusal itself
        # could not be written.
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return _shortened(value)
    if isinstance(value, int):
        return value if value.bit_length() <= 64 else _shortened(str(value))
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return value if len(text) <= MAX_SHOWN_VALUE else _shortened(text)


class CredentialRefusal(BaseModel):
    """No credential, one nobody issued (401), or one for another audience (403)."""

    model_config = ConfigDict(frozen=True)

    detail: str


class DownloadRefusal(BaseModel):
    """403 of the artifact download: a credential's refusal, or the run's token refused with
    `token_revoked` / `token_expired`."""

    model_config = ConfigDict(frozen=True)

    detail: ErrorDetail | str


_WHY = {
    401: "no bearer credential, or one that was never issued (or was revoked)",
    403: "a credential for another audience",
    404: "no such object for this caller (another organisation's objects included)",
    409: "the request contradicts the stored state",
    416: "the range lies outside the artifact (no body; `Content-Range: bytes */<length>`)",
    422: "a value breaks a rule; the message names the field, the value and what was expected",
    429: "a cap's round is full: retry after `retry_after_seconds`",
    503: "the database is unavailable, or the operators' brake is engaged: retry later",
}

# Every route that takes a credential and reads the database can answer these.
AUTHENTICATED = (401, 403, 503)


def errors(
    *statuses: int, models: dict[int, Any] | None = None, by_reference: bool = False
) -> dict[int | str, Any]:
    """`responses=` for these statuses; `models` overrides a status's body schema.

    `by_reference` names the schemas as JSON bodies explicitly, for a route whose own answer is
    not JSON (FastAPI would otherwise declare its errors in the route's media type); the schemas
    themselves are registered by the routes that name them as models."""
    chosen = models or {}
    answers: dict[int | str, Any] = {}
    for status in sorted(set(statuses)):
        if status == 416:
            answers[status] = {"description": _WHY[status]}
            continue
        model = chosen.get(status, CredentialRefusal if status in (401, 403) else ErrorAnswer)
        if by_reference:
            schema = {"$ref": f"#/components/schemas/{model.__name__}"}
            answers[status] = {
                "content": {"application/json": {"schema": schema}},
                "description": _WHY[status],
            }
        else:
            answers[status] = {"model": model, "description": _WHY[status]}
    return answers


def bounded_message(message: str) -> str:
    """A message within the contract's bound: an answer echoes the value it refuses, and a huge
    value must not make the message itself break the bound."""
    return clipped(message, MAX_MESSAGE_LENGTH)


# The JSON of `JSONResponse.render`, with one encoder for every refusal: `json.dumps` with
# these options builds a new encoder per call, a tenth of what answering a refused claim cost.
_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":"))


class InertJSON(JSONResponse):
    """A JSON answer whose every text is inert (`inert_values`)."""

    def render(self, content: Any) -> bytes:
        return super().render(inert_values(content))


def refusal_response(exc: RequestRefused) -> Response:
    """The answer to a refused request: `{"detail": …}` with its status, the value shortened
    (the body and headers a `JSONResponse` of it has)."""
    detail = exc.detail
    if isinstance(detail, dict):
        detail = {**detail, "message": bounded_message(detail["message"])}
        if "value" in detail:
            detail["value"] = shown_value(detail["value"])
    body = _JSON.encode(inert_values({"detail": detail})).encode("utf-8")
    return Response(body, status_code=exc.status, media_type=JSONResponse.media_type)
