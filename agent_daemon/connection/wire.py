"""What an answer of the control plane means to an agent, read with the contract's models.

Pure: a status code and a body in, a typed value (or `BadServerAnswer`) out. The daemon's client
and the demo's simulated fleet both read answers here, so the two cannot drift apart. Everything
from the network is untrusted input: a value outside the contract's bounds is a `BadServerAnswer`
naming the field, never a crash further in.

    is_offline          a 5xx that is not a contract refusal: consume nothing, retry next minute
    is_credential_refused   401/403 in the control plane's words: the agent must be enrolled again
    answer_words        any answer in one line (`404 Not Found`, `502 Bad Gateway (an HTML page)`)
    not_a_control_plane the one line for an answer no nachtwacht control plane gives (a web page,
                        a 404 without its words, a 401 from something in front of it)
    parse_config        GET config → `AgentConfig`
    claim_answer        POST claims → `ClaimGrant` or the refusal's `ErrorDetail`
    confirm_answer      POST confirm → `SwapPermit` or the refusal's `ErrorDetail`
    swap_refusal_reason what a refused confirmation ends the run with
    token_refusal_reason the outcome reason of a refusal naming the run's token (`token_revoked`,
                        `token_expired`), for the confirmation and the download alike
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError

from agent_daemon.errors import BadServerAnswer, describe_validation_error
from ground.contract import (
    CLAIMS_PATH,
    CONFIG_PATH,
    AgentConfig,
    AnswerCode,
    ClaimGrant,
    ErrorAnswer,
    ErrorDetail,
    InstantError,
    OutcomeReason,
    RefusalCode,
    SwapPermit,
    parse_instant,
)
from ground.contract.plain_text import clipped

__all__ = [
    "CLAIM_SOURCE",
    "CONFIG_SOURCE",
    "MAX_ETAG_LENGTH",
    "answer_words",
    "claim_answer",
    "confirm_answer",
    "detail_text",
    "error_detail",
    "is_control_plane_answer",
    "is_credential_refused",
    "is_offline",
    "looks_like_html",
    "not_a_control_plane",
    "parse_config",
    "parse_grant",
    "read_json",
    "server_time",
    "swap_refusal_reason",
    "token_refusal_reason",
    "usable_etag",
]

CONFIG_SOURCE = f"GET {CONFIG_PATH}"
CLAIM_SOURCE = f"POST {CLAIMS_PATH}"
CONFIRM_SOURCE = "POST confirm"
_GRANTED = frozenset({HTTPStatus.OK, HTTPStatus.CREATED})
_SHOWN_TEXT = 200


# A config or a grant is a few KiB (a grant carries the manifest: at most 64 KiB, in base64).
# A larger answer is refused before it is parsed.
MAX_ANSWER_BYTES = 1024 * 1024


# An ETag is a quoted string of a few dozen visible ASCII characters (RFC 9110 8.8.3).
MAX_ETAG_LENGTH = 1024


def usable_etag(value: object) -> str | None:
    """`value` when a request can carry it back in `If-None-Match` (visible ASCII, at most
    `MAX_ETAG_LENGTH`), else None: the next poll is a plain one, never a request that cannot be
    sent (the ETag comes from the control plane's answer and the cache file on disk)."""
    if not isinstance(value, str) or not 0 < len(value) <= MAX_ETAG_LENGTH:
        return None
    if not all("!" <= character <= "~" for character in value):
        return None
    return value


def _not_json(literal: str) -> float:
    raise ValueError(f"{literal[:40]} is not a JSON number (expected a finite number)")


def _finite(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value):
        _not_json(literal)
    return value


def _parsed(body: bytes) -> Any:
    """`body` as strict JSON: `NaN`, `Infinity` and a literal beyond a float's range, which
    Python's parser would read, are refused like any other text that is not JSON."""
    return json.loads(body, parse_constant=_not_json, parse_float=_finite)


def read_json(body: bytes, *, source: str) -> Any:
    if len(body) > MAX_ANSWER_BYTES:
        raise BadServerAnswer(
            f"{source}: the answer is {len(body)} bytes (at most {MAX_ANSWER_BYTES})"
        )
    try:
        return _parsed(body)
    # RecursionError: a document nested thousands deep; ValueError: not JSON, or a number past
    # Python's 4,300-digit guard. Either is a bad answer, never an exception further in.
    except (ValueError, RecursionError) as exc:
        raise BadServerAnswer(f"{source}: the answer is not JSON ({str(exc)[:200]})") from exc


def _json_or_none(body: bytes) -> Any:
    if len(body) > MAX_ANSWER_BYTES:
        return None
    try:
        return _parsed(body)
    except (ValueError, RecursionError):
        return None


def error_detail(body: bytes) -> ErrorDetail | None:
    """The contract's `{"detail": {"code": …, "message": …}}`, or None for any other body."""
    try:
        return ErrorAnswer.model_validate(_json_or_none(body)).detail
    except ValidationError:
        return None


def looks_like_html(body: bytes, content_type: str | None = None) -> bool:
    """Whether an answer is a web page (a proxy's, a login page's, a web server's): nothing a
    nachtwacht control plane sends."""
    if content_type is not None and "html" in content_type.lower():
        return True
    return body.lstrip()[:1] == b"<"


def is_control_plane_answer(body: bytes) -> bool:
    """Whether a body is in the control plane's words: a JSON object with its `detail` (a message
    alone, as a refused credential's, or the contract's code and message)."""
    document = _json_or_none(body)
    return isinstance(document, dict) and "detail" in document


def detail_text(body: bytes, content_type: str | None = None) -> str:
    """A short account of an error answer for a log line or an exception, always one line: a web
    page is named, never copied."""
    detail = error_detail(body)
    if detail is not None:
        return _one_line(detail.message or detail.code)
    document = _json_or_none(body)
    if isinstance(document, dict) and "detail" in document:
        return _one_line(str(document["detail"]))
    if looks_like_html(body, content_type):
        return "an HTML page"
    return _one_line(body[: _SHOWN_TEXT * 2].decode("utf-8", errors="replace"))


def _one_line(text: str) -> str:
    return clipped(" ".join(text.split()), _SHOWN_TEXT)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def answer_words(
    status: int, body: bytes, content_type: str | None = None, reason: str | None = None
) -> str:
    """An answer in one line: `404 Not Found`, `403 Forbidden (credential for another audience)`,
    `502 Bad Gateway (an HTML page)`. `reason` is the status line's own phrase: one that is not
    the standard one is the answering server's word (a proxy's `403 Filtered`) and is kept."""
    text = detail_text(body, content_type)
    words = _status_words(status, reason)
    return f"{words} ({text})" if text else words


def _status_words(status: int, reason: str | None = None) -> str:
    phrase = _phrase(status)
    said = _one_line("".join(c for c in reason or "" if c.isprintable()))
    if said and said.lower() != phrase.lower():
        phrase = said
    return f"{status} {phrase}".rstrip()


def not_a_control_plane(
    status: int,
    body: bytes,
    *,
    content_type: str | None,
    server: str,
    reason: str | None = None,
    proxy: str | None = None,
) -> str | None:
    """The one line for an answer no nachtwacht control plane gives, naming `server` (the URL the
    agent was configured with) and `proxy` (the configured proxy that carried the request, with
    where it was configured), or None when the answer may well be the control plane's.

    A web page is a web server's, a proxy's or a login page's; a 404 or a 401/403 without the
    control plane's JSON `detail` comes from something else at that address or in front of it —
    never a reason to tell the admin that the agent's credential was refused."""
    words = answer_words(status, body, content_type, reason)
    if is_control_plane_answer(body):
        return None
    if status in {HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN}:
        if proxy is not None:
            wants = (
                "wants credentials" if status == HTTPStatus.UNAUTHORIZED else "refuses the request"
            )
            return (
                f"{words} through the proxy {proxy}, not the control plane's answer: the proxy, "
                f"or a server between it and {server}, {wants} (check the proxy's rules for the "
                "control plane's host); the agent's own credential was not judged"
            )
        return (
            f"{words} from something at {server} that is not the control plane (a proxy, or a "
            "server in front of it, wants credentials): the agent's own credential was not judged"
        )
    through = f", through the proxy {proxy}" if proxy is not None else ""
    if looks_like_html(body, content_type):
        return (
            f"the server at {server} answered {_status_words(status, reason)} with an HTML page"
            f"{through}: it is not a nachtwacht control plane (is the URL the control plane's, "
            "and is a proxy or a login page in the way?)"
        )
    if status == HTTPStatus.NOT_FOUND:
        return f"found {words} at {server}{through}: is the URL the control plane's?"
    return None


def is_offline(status: int, body: bytes) -> bool:
    """A 5xx is the platform being unavailable (a dead proxy, the database down) unless it is a
    contract refusal (the brake's 503), which has its own meaning for the slot."""
    if status < HTTPStatus.INTERNAL_SERVER_ERROR:
        return False
    detail = error_detail(body)
    return detail is None or detail.refusal is None


def is_credential_refused(status: int, body: bytes | None = None) -> bool:
    """401/403; with `body`, only in the control plane's words (a proxy's 401 is not a refused
    agent credential)."""
    if status not in {HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN}:
        return False
    return body is None or is_control_plane_answer(body)


def parse_config(document: Any, *, source: str = CONFIG_SOURCE) -> AgentConfig:
    try:
        return AgentConfig.model_validate(document)
    except ValidationError as exc:
        raise BadServerAnswer(describe_validation_error(exc, source)) from exc


def parse_grant(document: Any, *, source: str = CLAIM_SOURCE) -> ClaimGrant:
    try:
        return ClaimGrant.model_validate(document)
    except ValidationError as exc:
        raise BadServerAnswer(describe_validation_error(exc, source)) from exc


def claim_answer(status: int, body: bytes) -> ClaimGrant | ErrorDetail:
    """A grant (201 new, 200 the same claim again) or a refusal with its code. Call it only when
    the answer is not offline (`is_offline`) and the credential was accepted."""
    if status in _GRANTED:
        return parse_grant(read_json(body, source=CLAIM_SOURCE))
    detail = error_detail(body)
    if detail is None:
        raise BadServerAnswer(
            f"{CLAIM_SOURCE}: expected 201/200 or a refusal with a code, found {status} "
            f"({detail_text(body)})"
        )
    return detail


def confirm_answer(status: int, body: bytes) -> SwapPermit | ErrorDetail:
    """200 with a `SwapPermit` (the only answer that allows the switch), or a refusal with its
    code. Call it only when the answer is not offline (`is_offline`)."""
    if status == HTTPStatus.OK:
        try:
            return SwapPermit.model_validate(read_json(body, source=CONFIRM_SOURCE))
        except ValidationError as exc:
            raise BadServerAnswer(describe_validation_error(exc, CONFIRM_SOURCE)) from exc
    detail = error_detail(body)
    if detail is None:
        raise BadServerAnswer(
            f"{CONFIRM_SOURCE}: expected 200 with a swap permit or a refusal with a code, found "
            f"{status} ({detail_text(body)})"
        )
    return detail


# A refusal that names the run's token, kept as the run's outcome reason: the confirmation's and
# the download's (`agent_daemon.updater.failure_reasons`) alike.
_TOKEN_REFUSALS = {
    AnswerCode.TOKEN_REVOKED.value: OutcomeReason.TOKEN_REVOKED,
    AnswerCode.TOKEN_EXPIRED.value: OutcomeReason.TOKEN_EXPIRED,
}


def token_refusal_reason(code: str | None) -> OutcomeReason | None:
    """The outcome reason of a refusal whose `code` names the run's token (revoked by the brake
    or a halt, or expired); None for any other code."""
    return _TOKEN_REFUSALS.get(code or "")


def swap_refusal_reason(detail: ErrorDetail) -> OutcomeReason:
    """What a refused confirmation ends the run with: the token's code kept; a closed window is
    `window_closed`; any other code (the run unknown or finished) means this run may no longer
    switch, as a revoked token does."""
    if detail.code == RefusalCode.WINDOW_CLOSED.value:
        return OutcomeReason.WINDOW_CLOSED
    return token_refusal_reason(detail.code) or OutcomeReason.TOKEN_REVOKED


def server_time(header: str | None) -> datetime | None:
    """The control plane's clock from its header; None when absent or unreadable (then the
    offset learned before stays)."""
    if header is None:
        return None
    try:
        return parse_instant(header)
    except InstantError:
        return None
