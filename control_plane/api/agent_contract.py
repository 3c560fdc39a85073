"""Which agents this control plane serves, by the contract they speak.

Every answer carries this control plane's `CONTRACT_VERSION` in `CONTRACT_VERSION_HEADER`. An
agent sends its own with every request; one that sends none is from before the header (contract
1) and is served as it always was. An agent request whose header names a contract older than
`OLDEST_AGENT_CONTRACT` is refused (400 `contract_too_old`, naming both versions) before any
route reads it: what such an agent sends or expects may no longer be what the routes mean (an
agent without the header counts as contract 1, so it is refused too once 1 is no longer served).
A header that is not a decimal whole number is a 422 `invalid_request` naming it, and so is one
sent twice with two values (`api.deps.one_value`'s words), with a key or without one: the check
comes before the key is looked at, so an agent always learns that it is too old. A contract
newer than this control plane's is served: the agent knows it may meet an older control plane
(one replica not yet upgraded) and reads what it is answered as such.

The policy: this control plane serves agents of the previous release unchanged — one release
back. At each release, `OLDEST_AGENT_CONTRACT` becomes the contract the previous release's agents
send (unchanged when that release did not change the contract), never more.
"""

from __future__ import annotations

import json

from starlette.types import Message, Scope

from control_plane.api.answers import refusal_response
from control_plane.api.deps import one_value
from control_plane.errors import InvalidInput
from ground.contract import API_PREFIX, CONTRACT_VERSION, CONTRACT_VERSION_HEADER, AnswerCode

__all__ = [
    "AGENT_PATHS",
    "AGENT_RELEASES_SUPPORTED_BACK",
    "CONTRACT_BEFORE_HEADER",
    "CONTRACT_STAMP",
    "OLDEST_AGENT_CONTRACT",
    "agent_contract_of",
    "agent_refusal",
]

# How many releases back an agent may be and still be served unchanged: the previous release's
# agents (tests/rolling runs that release's agent, from the repository's history, against this
# control plane). Agents older than that may still be served, but nothing proves it.
AGENT_RELEASES_SUPPORTED_BACK = 1
# The oldest contract an agent may speak and be served: the one the agents of the release
# `AGENT_RELEASES_SUPPORTED_BACK` before this one send.
OLDEST_AGENT_CONTRACT = 1
# What an agent that sends no header speaks: it is from before the header.
CONTRACT_BEFORE_HEADER = 1

AGENT_PATHS = f"{API_PREFIX}/agent/"
_HEADER = CONTRACT_VERSION_HEADER.lower().encode("ascii")
# The header every answer carries: this control plane's contract.
CONTRACT_STAMP = (_HEADER, str(CONTRACT_VERSION).encode("ascii"))
# Longer than any contract version will be: a longer value is refused without converting it.
_MAX_DIGITS = 6


def _agent_contract(scope: Scope) -> list[bytes]:
    """The header's values, in the order sent (none when absent)."""
    return [bytes(value) for name, value in scope["headers"] if name == _HEADER]


def _refusal(status: int, code: AnswerCode, message: str) -> bytes:
    detail: dict[str, object] = {"code": code.value, "message": message}
    if code is AnswerCode.INVALID_REQUEST:
        detail["errors"] = [{"field": CONTRACT_VERSION_HEADER, "message": message}]
    return json.dumps({"detail": detail}).encode("utf-8")


def _judged(sent: bytes | None) -> tuple[int, bytes] | None:
    """The refusal of an agent request whose header says `sent` (None: no header); None to serve
    it."""
    if sent is None:
        version = CONTRACT_BEFORE_HEADER
    else:
        text = sent.decode("latin-1")
        if not (text.isascii() and text.isdigit() and len(text) <= _MAX_DIGITS):
            shown = text if len(text) <= 40 else f"{text[:39]}…"
            message = (
                f"{CONTRACT_VERSION_HEADER}: {shown!r} — expected the agent's contract version, "
                "a whole number"
            )
            return 422, _refusal(422, AnswerCode.INVALID_REQUEST, message)
        version = int(text)
    if version < OLDEST_AGENT_CONTRACT:
        message = (
            f"this agent speaks contract version {version} ({CONTRACT_VERSION_HEADER}); this "
            f"control plane serves agents of contract versions {OLDEST_AGENT_CONTRACT} to "
            f"{CONTRACT_VERSION}: upgrade the agent on this host"
        )
        return 400, _refusal(400, AnswerCode.CONTRACT_TOO_OLD, message)
    return None


def agent_contract_of(sent: str | None) -> int:
    """The contract an agent request speaks, from its header's value (None: no header). Only
    for a request `agent_refusal` let through, whose header is a whole number."""
    return CONTRACT_BEFORE_HEADER if sent is None else int(sent)


def agent_refusal(scope: Scope) -> list[Message] | None:
    """The answer (its ASGI messages) refusing an agent request of a contract not served; None
    for every other request, which goes on. Every answer, this one included, carries
    `CONTRACT_STAMP` (the app's outermost middleware adds it)."""
    if not scope["path"].startswith(AGENT_PATHS):
        return None
    values = _agent_contract(scope)
    if len(values) > 1:
        try:
            # Two values: judged by neither, key or none (which one the agent speaks is a guess).
            one_value(CONTRACT_VERSION_HEADER, [value.decode("latin-1") for value in values])
        except InvalidInput as contradicted:
            answer = refusal_response(contradicted)
            return _messages(answer.status_code, bytes(answer.body))
    refused = _judged(values[0] if values else None)
    return None if refused is None else _messages(*refused)


def _messages(status: int, body: bytes) -> list[Message]:
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode("ascii")),
    ]
    return [
        {"type": "http.response.start", "status": status, "headers": headers},
        {"type": "http.response.body", "body": body},
    ]
