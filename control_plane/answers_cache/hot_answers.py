"""The agents' two calls of every minute answered from memory, before FastAPI routes them.

`GET /v1/agent/config` and the refusal of `POST /v1/agent/claims` are what a whole fleet sends:
the poll every minute all day, the refusal all through 03:00. When the `AnswerMemory` (kept exact
by the change feed) knows the answer, this middleware gives it here, inside the server-time and
request-limit middleware, without FastAPI's routing, dependency solving and exception handling —
most of what such a request still cost once the database was out of the way. The answer is made
by the same service methods and the same response classes as the routes', and only for a request
the routes would read the same way: a bearer credential, a well-formed host id, the query or body
the route takes. Anything else, and anything the memory does not decide, goes on to the routes
unchanged (the body replayed), which answer it as they always did.

The answers themselves are the application's: it hands the middleware a `FromMemory` (the API's
is `api.hot_calls`), so the cache reads requests and decides when to answer, and imports none
of the services or routes that import the cache.

A slot's claim the memory cannot refuse — its facts say it may be granted, and this worker does
not know yet whether the round is full — waits here for the grants in flight in this worker
(`answers_cache.in_flight`), is decided again each time one of them finishes, and goes on to
the route only when it is let through: the claims of a round's start that end refused never pay
for FastAPI.

Every other unsafe request that reaches the routes and succeeds is counted as a write of this
replica before its answer goes out (`answers_cache.ReplicaWrites`): whichever worker takes the
next request does not answer it from memory until its feed has been read again since. A claim
counts its own writes (`ClaimService`): a grant is forgotten at once by its worker's memory
only — the claims waiting behind it in that worker are refused from the counts it left, which
a replica-wide count would send to the database instead — and a refusal that records the slot
consumed is counted like any write.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Protocol
from urllib.parse import parse_qsl

from pydantic import ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from control_plane.accounts.credentials import secret_sha256
from control_plane.accounts.services import HOST_ID_PATTERN
from control_plane.answers_cache.in_flight import GrantsInFlight, KnownRoom
from control_plane.answers_cache.own_writes import ReplicaWrites
from control_plane.errors import RequestRefused
from ground.contract import (
    CHANNEL_PARAM,
    CLAIMS_PATH,
    CONFIG_PATH,
    HOST_ID_HEADER,
    HOST_TIME_HEADER,
    PLATFORM_PARAM,
    TRUST_ROOT_VERSION_HEADER,
    ClaimRequest,
    ReleaseTrack,
)
from ground.limits import DEFAULT_CHANNEL, DEFAULT_PLATFORM, RELEASE_NAME_PATTERN

__all__ = ["FromMemory", "HotAnswers"]


class FromMemory(Protocol):
    """The application's answers from memory, as the middleware asks for them."""

    @property
    def writes(self) -> ReplicaWrites:
        """The replica's count of writes."""

    @property
    def grants_in_flight(self) -> GrantsInFlight:
        """The grants under way in this worker."""

    def config(
        self,
        secret_sha256: str,
        track: ReleaseTrack,
        now: datetime,
        *,
        host_id: str | None,
        trust_root: str | None,
        host_time: str | None,
        if_none_match: str | None,
    ) -> Response | None:
        """The config poll's answer from memory (its headers as sent); None: not remembered."""

    def refuse_claim(
        self, secret_sha256: str, body: ClaimRequest, now: datetime
    ) -> KnownRoom | None:
        """Raise the slot claim's refusal from memory; else the room this worker knows of in
        the round, or None when it remembers nothing of the claim."""

    def refusal(self, refused: RequestRefused) -> Response:
        """The response a refusal is answered with."""


_RELEASE_NAME = re.compile(RELEASE_NAME_PATTERN)
_HOST_ID = HOST_ID_HEADER.lower().encode("ascii")
_TRUST_ROOT = TRUST_ROOT_VERSION_HEADER.lower().encode("ascii")
_HOST_TIME = HOST_TIME_HEADER.lower().encode("ascii")
_READ_HEADERS = {
    b"authorization",
    b"if-none-match",
    b"content-type",
    _HOST_ID,
    _TRUST_ROOT,
    _HOST_TIME,
}


def _headers(scope: Scope) -> dict[bytes, str] | None:
    """The headers the hot calls read; None when any header is sent twice with two values: the
    routes judge it (`api.deps.said_once` refuses one they read, the contract's and `Range`
    among them), never an answer kept for a request that said one thing."""
    found: dict[bytes, str] = {}
    sent: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        if sent.setdefault(name, value) != value:
            return None
        if name in _READ_HEADERS:
            found[name] = value.decode("latin-1")
    return found


def _bearer(headers: dict[bytes, str]) -> str | None:
    scheme, _, secret = headers.get(b"authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        return None
    return secret


def _host_id(headers: dict[bytes, str]) -> tuple[bool, str | None]:
    """(usable, host id): a malformed host id is the routes' 422."""
    host_id = headers.get(_HOST_ID)
    return host_id is None or HOST_ID_PATTERN.fullmatch(host_id) is not None, host_id


def _track(query_string: bytes) -> ReleaseTrack | None:
    """The pair named in the query as the config route reads it; None for anything else."""
    values = {CHANNEL_PARAM: DEFAULT_CHANNEL, PLATFORM_PARAM: DEFAULT_PLATFORM}
    named: set[str] = set()
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if name not in values or name in named or _RELEASE_NAME.fullmatch(value) is None:
            return None
        named.add(name)
        values[name] = value
    return ReleaseTrack(channel=values[CHANNEL_PARAM], platform=values[PLATFORM_PARAM])


_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _may_have_written(status: int) -> bool:
    """Whether an unsafe request answered with `status` may have written something an answer
    depends on: a success. A refusal wrote nothing, and neither did a failure (its transaction
    was rolled back)."""
    return status < 400


def _replayed(message: Message, receive: Receive) -> Receive:
    pending = [message]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class HotAnswers:
    """ASGI middleware over the application; `answers` are the application's."""

    def __init__(self, app: ASGIApp, answers: FromMemory) -> None:
        self._app = app
        self._answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            if method == "GET" and path == CONFIG_PATH:
                answer = self._config(scope)
                if answer is not None:
                    await answer(scope, receive, send)
                    return
            elif method == "POST" and path == CLAIMS_PATH:
                await self._claim(scope, receive, send)
                return
            if method not in _SAFE_METHODS:
                send = self._counting_writes(send)
        await self._app(scope, receive, send)

    def _counting_writes(self, send: Send) -> Send:
        """`send`, counting the request's write in the replica before its answer goes out: the
        agent's next request, whichever worker it reaches, is then not answered from a memory
        that has not read the feed since."""
        writes = self._answers.writes

        async def counted(message: Message) -> None:
            if message["type"] == "http.response.start" and _may_have_written(message["status"]):
                writes.note()
            await send(message)

        return counted

    async def _claim(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        replayed = _replayed(message, receive)
        claim = self._slot_claim(scope, message)
        if claim is None:
            await self._app(scope, replayed, send)
            return
        secret, body = claim
        now = scope["state"]["now"]
        answers = self._answers

        def known_room() -> KnownRoom | None:
            # Raises the refusal from memory; else the room this worker knows of in the round.
            return answers.refuse_claim(secret, body, now)

        try:
            admission = await answers.grants_in_flight.admit(known_room)
        except RequestRefused as refused:
            await answers.refusal(refused)(scope, replayed, send)
            return
        try:
            await self._app(scope, replayed, send)
        finally:
            admission.finish()

    def _config(self, scope: Scope) -> Response | None:
        headers = _headers(scope)
        if headers is None:
            return None
        secret = _bearer(headers)
        usable, host_id = _host_id(headers)
        track = _track(scope.get("query_string", b""))
        if secret is None or not usable or track is None:
            return None
        return self._answers.config(
            secret_sha256(secret),
            track,
            scope["state"]["now"],
            host_id=host_id,
            trust_root=headers.get(_TRUST_ROOT),
            host_time=headers.get(_HOST_TIME),
            if_none_match=headers.get(b"if-none-match"),
        )

    def _slot_claim(self, scope: Scope, message: Message) -> tuple[str, ClaimRequest] | None:
        """(credential hash, body) of a slot's claim, read as the route reads it."""
        if message["type"] != "http.request" or message.get("more_body", False):
            return None
        headers = _headers(scope)
        if headers is None or not headers.get(b"content-type", "").startswith("application/json"):
            return None
        secret = _bearer(headers)
        usable, _ = _host_id(headers)
        if secret is None or not usable:
            return None
        try:
            # As FastAPI reads a body: parsed JSON, then the model in Python mode.
            body = ClaimRequest.model_validate(json.loads(message.get("body", b"")))
        except (ValueError, ValidationError, RecursionError):
            # Not a claim this path reads (nested past Python's parser, too): the route answers.
            return None
        if body.slot_key is None:
            return None
        return secret_sha256(secret), body
