"""What every request must satisfy before any route parses it: a bounded body, and no text the
database cannot store.

    body size   at most `MAX_BODY_BYTES` (64 KiB), or `MAX_RELEASE_BODY_BYTES` for the release
                upload (the build travels base64 in the body), or the largest trust root for
                a trust root's upload (`signed_release.trust_root.MAX_ROOT_BYTES`). A
                `Content-Length` above the limit is refused before one byte is read; a body
                without one (chunked) is counted as it arrives and refused the moment it passes
                the limit. Both: 413 `request_too_large`, whatever the credential (none is checked
                yet: an unauthenticated sender must not be able to make a replica buffer a large
                body either). A request the app's `too_large_page` answers (the panel's forms)
                gets that page instead, with the same status, never the JSON. Before either is
                sent the rest of the body is read and thrown away, up to `MAX_DRAINED_BYTES`
                in all: a browser, and most HTTP clients, send the whole body before they read
                the answer, and a connection closed with bytes still unread is reset, the answer
                with it.
    text        a JSON string (key or value) with a NUL character or a lone UTF-16 surrogate,
                or a NUL in the path or query, is a 422 `invalid_request` naming where it is
                (an address the app's `bad_address_page` answers, the panel's, gets that page).
                PostgreSQL's text holds neither (a NUL fails inside the database, a surrogate
                cannot even be encoded), so a rule at the door covers every field that reaches
                SQL, including those read before their validator (the claim's `slot_key`). The
                one exception is text an agent reports as it saw it (`AGENT_TEXT`, the contract's
                `AGENT_TEXT_MARK`): a NUL or a lone surrogate in it passes, and is stored as its
                escape (`\\u0000`, `\\udcff`).
    numbers     `NaN`, `Infinity`, `-Infinity` and a literal beyond a float's range (`1e400`) are
                not JSON, though Python's parser reads them: a 422 `invalid_request` naming the
                field and the literal as sent. Past the door no route could even answer about
                such a value (a refusal that echoes it cannot be written as JSON).

Cheap on the hot path: a claim's body is one small message, and the JSON is parsed a second time
only when its bytes hold a `\\u` escape — the one way such a character can arrive, since a raw NUL
byte is not valid JSON and a raw surrogate is not valid UTF-8 — or something that may be such a
number where a value starts (after `:`, `[` or `,`).
A request whose headers frame no body (no Transfer-Encoding, no Content-Length or `0`: the poll,
`/healthz`) is passed on as it came, with nothing read or replayed.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ground.contract import API_PREFIX, RUNS_PATH, UNREACHABLE_PATH, AnswerCode
from ground.contract.messages import AGENT_TEXT_MARK
from ground.contract.plain_text import inert_values
from signed_release.artifact import MAX_BUILD_BYTES
from signed_release.trust_root import MAX_ROOT_BYTES

__all__ = [
    "AGENT_TEXT",
    "MAX_BODY_BYTES",
    "MAX_RELEASE_BODY_BYTES",
    "STORABLE_TEXT_PATTERN",
    "BadAddressPage",
    "RequestLimits",
    "TooLargePage",
    "refused_json",
    "state_storable_text",
]

# Every request of the API fits easily: the largest legitimate body besides a release is a
# schedule of 288 times (about 2.6 KB).
MAX_BODY_BYTES = 64 * 1024
# A release carries its build base64-encoded (4/3 of its size) and its patches: room for the
# largest build the platform takes and as much again in patches (256 MiB for a 96 MiB build).
MAX_RELEASE_BODY_BYTES = 2 * 4 * -(-MAX_BUILD_BYTES // 3)
RELEASE_UPLOAD = ("POST", f"{API_PREFIX}/admin/releases")
# How much of a body over its limit is read (and thrown away, never kept) so that its answer
# reaches a client that sends before it reads: what the shipped nginx site passes on (1 MiB). A
# larger body gets its answer at once, and the connection is closed with the rest unread.
MAX_DRAINED_BYTES = 1024 * 1024
# The requests whose body may be larger than `MAX_BODY_BYTES`, and their own limit.
_LARGER_BODIES = {
    RELEASE_UPLOAD: MAX_RELEASE_BODY_BYTES,
    ("POST", f"{API_PREFIX}/admin/trust-roots"): MAX_ROOT_BYTES,
}


# The fields of text an agent reports as it saw it, by method and path (a run's path ends in its
# id): the contract and the service store a NUL or a lone surrogate in them inert
# (`ground.contract.plain_text`), so the door lets them pass. The contract marks the same fields
# (`AGENT_TEXT_MARK`).
AGENT_TEXT: dict[tuple[str, str], frozenset[str]] = {
    ("PATCH", RUNS_PATH + "/{run_id}"): frozenset({"error"}),
    ("POST", UNREACHABLE_PATH): frozenset({"error"}),
}


def _agent_text_fields(method: str, path: str) -> frozenset[str]:
    if path.startswith(RUNS_PATH + "/") and "/" not in path[len(RUNS_PATH) + 1 :]:
        path = RUNS_PATH + "/{run_id}"
    return AGENT_TEXT.get((method, path), frozenset())


# The rule on text as the OpenAPI states it for every string without a pattern of its own: no NUL
# (an ECMA and Python regex alike). A lone surrogate has no pattern that leaves a pair intact in
# both dialects; it is refused all the same.
STORABLE_TEXT_PATTERN = r"^[^\u0000]*$"


def state_storable_text(document: Any) -> None:
    """Give every string schema of an OpenAPI `document` (in place) that names no pattern, value
    list or binary format, and is no agent's text, the rule this module enforces at the door."""
    stack = [document]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            if (
                item.get("type") == "string"
                and not {"pattern", "enum", "const", AGENT_TEXT_MARK} & item.keys()
                and item.get("format") not in {"binary", "uuid", "date", "date-time"}
            ):
                item["pattern"] = STORABLE_TEXT_PATTERN
            stack.extend(item.values())


class _TooLarge(Exception):
    """The body passed its limit after `read` bytes; `ended`: its last part had arrived."""

    def __init__(self, read: int, *, ended: bool) -> None:
        super().__init__(read)
        self.read = read
        self.ended = ended


def _problem(field: str, why: str) -> str:
    return f"{field}: {why}"


def _bad_character(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone UTF-16 surrogate (not a Unicode character), which cannot be stored"
    return None


# What a body must hold for the second reading to find anything: an escape (a NUL or a
# surrogate can only arrive as one), or where a value starts a non-finite token or a literal that
# may overflow a float (a three-digit exponent, or 200 digits before a shorter one could reach
# 1e308). A match inside a string costs one needless reading, never a wrong answer. Asked as
# three questions rather than one pattern `\\u|(?:^|[\[:,])…`: that one tried each alternative
# at every byte of every body, and cost a refused claim more than all its headers' checks.
_RISKY_VALUE = rb"\s*-?(?:NaN|Infinity|[0-9]+(?:\.[0-9]*)?[eE][+-]?[0-9]{3}|[0-9]{200})"
_RISKY_FIRST_VALUE = re.compile(_RISKY_VALUE)
_RISKY_INNER_VALUE = re.compile(rb"[\[:,]" + _RISKY_VALUE)


def _may_be_refused(body: bytes) -> bool:
    return (
        b"\\u" in body
        or _RISKY_FIRST_VALUE.match(body) is not None
        or _RISKY_INNER_VALUE.search(body) is not None
    )


_MAX_SHOWN_LITERAL = 40


class _NotFinite:
    """A number JSON cannot carry, as its literal was sent."""

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def problem(self) -> str:
        shown = self.literal
        if len(shown) > _MAX_SHOWN_LITERAL:
            shown = f"{shown[:_MAX_SHOWN_LITERAL]}… ({len(self.literal)} characters)"
        return (
            f"{shown} is not valid JSON (expected a finite number: JSON has no NaN or Infinity, "
            "and a number must lie within ±1.7976931348623157e308)"
        )


def _finite_or_not(literal: str) -> float | _NotFinite:
    value = float(literal)
    return value if math.isfinite(value) else _NotFinite(literal)


def _leaves(value: Any, path: str) -> Iterator[tuple[str, object]]:
    """Every string (keys too) and number of a parsed JSON document with its field path
    (`times[1]`, `a.b`)."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, inner in reversed(item.items()):
                inner_path = f"{where}.{key}" if where else str(key)
                stack.append((inner, inner_path))
                stack.append((str(key), where or "body"))
        elif isinstance(item, list):
            stack.extend(
                (inner, f"{where}[{index}]") for index, inner in reversed(list(enumerate(item)))
            )
        else:
            yield where, item


def refused_json(body: bytes, agent_text: frozenset[str] = frozenset()) -> str | None:
    """The first problem of a JSON body the door refuses (text the database cannot store, a
    number JSON cannot carry), or None. A NUL or a lone surrogate in the value of a top-level
    field named in `agent_text` is no problem (the contract and its service make it inert).

    A body that is not JSON is left to the route (its parser names the problem)."""
    if not _may_be_refused(body):
        return None
    try:
        document = json.loads(body, parse_constant=_NotFinite, parse_float=_finite_or_not)
    except (ValueError, RecursionError):
        return None
    for field, leaf in _leaves(document, ""):
        if isinstance(leaf, _NotFinite):
            return _problem(field or "body", leaf.problem())
        if isinstance(leaf, str):
            why = None if field in agent_text else _bad_character(leaf)
            if why is not None:
                return _problem(field or "body", why)
    return None


def _refusal(status: int, code: str, message: str, field: str | None = None) -> bytes:
    detail: dict[str, Any] = {"code": code, "message": message}
    if field is not None:
        detail["errors"] = [{"field": field, "message": message}]
    # A field is named by the caller's own key: read, not obeyed, as every answer's text.
    return json.dumps(inert_values({"detail": detail})).encode("utf-8")


# The page for a request over its size limit (given the request's scope and the limit in bytes),
# or None where the API's JSON answers.
TooLargePage = Callable[[Scope, int], Response | None]
# The page for a request with a NUL in its address (given its scope), or None where the API's
# JSON answers.
BadAddressPage = Callable[[Scope], Response | None]


class RequestLimits:
    """The ASGI middleware that enforces the module's rules before the application runs."""

    def __init__(
        self,
        app: ASGIApp,
        too_large_page: TooLargePage | None = None,
        bad_address_page: BadAddressPage | None = None,
    ) -> None:
        self._app = app
        self._too_large_page = too_large_page
        self._bad_address_page = bad_address_page

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        where = _nul_in_address(scope)
        if where is not None:
            page = None if self._bad_address_page is None else self._bad_address_page(scope)
            if page is not None:
                await self._answer_unread(scope, receive, send, page)
                return
            message = _problem(where, "contains a NUL character (\\u0000)")
            await _answer(send, 422, _refusal(422, AnswerCode.INVALID_REQUEST, message, where))
            return
        limit = _LARGER_BODIES.get((scope["method"], scope["path"]), MAX_BODY_BYTES)
        declared, framed = _declared_body(scope)
        if declared is not None and declared > limit:
            unread = declared if declared <= MAX_DRAINED_BYTES else None
            await self._too_large(scope, receive, send, limit, unread=unread)
            return
        if not framed:
            # No Content-Length (or 0) and no Transfer-Encoding: by HTTP/1.1's framing the request
            # has no body, so there is nothing to count, check or replay (every poll, `/healthz`).
            await self._app(scope, receive, send)
            return
        try:
            body, last = await _read_body(receive, limit)
        except _TooLarge as over:
            unread = None if over.ended else MAX_DRAINED_BYTES - over.read
            await self._too_large(scope, receive, send, limit, unread=unread)
            return
        problem = refused_json(body, _agent_text_fields(scope["method"], scope["path"]))
        if problem is not None:
            field = problem.split(":", 1)[0]
            await _answer(send, 422, _refusal(422, AnswerCode.INVALID_REQUEST, problem, field))
            return
        await self._app(scope, _replay(body, last, receive), send)

    async def _too_large(
        self, scope: Scope, receive: Receive, send: Send, limit: int, *, unread: int | None
    ) -> None:
        """`unread`: how much more of the body may be read before the answer, None for nothing.
        The JSON 413 and the page alike: a client that sends its whole body before it reads
        is reset, answer and all, by a connection closed with bytes still unread."""
        if unread is not None and unread > 0:
            await _drain(receive, unread)
        page = None if self._too_large_page is None else self._too_large_page(scope, limit)
        if page is None:
            await _too_large(send, limit)
            return
        # The body may not have been read to its end: the connection carries no other request.
        page.headers["connection"] = "close"
        await page(scope, receive, send)

    async def _answer_unread(
        self, scope: Scope, receive: Receive, send: Send, page: Response
    ) -> None:
        """`page` for a request whose body nothing read: read it first (up to
        `MAX_DRAINED_BYTES`), as for a page over the size limit."""
        declared, framed = _declared_body(scope)
        if framed:
            if declared is None or declared <= MAX_DRAINED_BYTES:
                await _drain(receive, MAX_DRAINED_BYTES)
            page.headers["connection"] = "close"
        await page(scope, receive, send)


def _nul_in_address(scope: Scope) -> str | None:
    if "\x00" in scope["path"]:
        return "path"
    query: bytes = scope.get("query_string", b"")
    if b"%00" in query or b"\x00" in query:
        return "query"
    return None


def _declared_body(scope: Scope) -> tuple[int | None, bool]:
    """(the Content-Length as a number if it is one, whether the headers frame a body at all).

    A body is framed by a Transfer-Encoding or a Content-Length other than 0 — an unreadable
    Content-Length too, to be safe: its body is then read and counted like a chunked one."""
    declared: int | None = None
    framed = False
    for name, value in scope["headers"]:
        if name == b"content-length":
            try:
                declared = int(value)
            except ValueError:
                declared = None
            framed = framed or value != b"0"
        elif name == b"transfer-encoding":
            framed = True
    return declared, framed


async def _read_body(receive: Receive, limit: int) -> tuple[bytes, Message | None]:
    """The whole body, counted as it arrives; the last message if it was not a body chunk."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge(size, ended=not message.get("more_body", False))
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), None


async def _drain(receive: Receive, at_most: int) -> None:
    """Read the rest of a body and throw it away: until its end, the client's disconnect, or
    `at_most` bytes."""
    read = 0
    while read <= at_most:
        message = await receive()
        if message["type"] != "http.request":
            return
        read += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


def _replay(body: bytes, last: Message | None, receive: Receive) -> Receive:
    """A `receive` that hands the application the body already read, then the real channel
    (which later says when the client disconnects)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]
    if last is not None:
        pending = [last]

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


async def _too_large(send: Send, limit: int) -> None:
    message = f"body: is larger than {limit} bytes (the limit for this request)"
    await _answer(send, 413, _refusal(413, AnswerCode.REQUEST_TOO_LARGE, message))


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
    ]
    if status == 413:
        # The body was not read to its end: the connection cannot carry another request.
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
