"""Request-scoped inputs for the routes: the caller, the services, the request's instant.

Each audience has its own bearer scheme in OpenAPI (`panel`, `agent`, `operator`), and the host's
enrollment token one more (`enrollment`), so a generated client knows which key an operation
takes. The schemes never answer by themselves (`auto_error=False`): a missing, unknown or
wrong-audience key is the accounts service's 401/403 (an enrollment token's, the enrollment
service's 401).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, TypeVar, cast

import anyio.to_thread
from anyio import CapacityLimiter
from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from control_plane.accounts.credentials import PREFIXES, Audience, secret_sha256
from control_plane.accounts.services import Principal, check_host_id
from control_plane.errors import InvalidInput, Unauthenticated, quoted
from control_plane.registry import Services
from ground.contract import (
    CONTRACT_VERSION_HEADER,
    HOST_ID_HEADER,
    HOST_TIME_HEADER,
    TRUST_ROOT_VERSION_HEADER,
)

__all__ = [
    "ENROLLMENT_SCHEME",
    "AgentCaller",
    "AgentCredential",
    "EnrollmentBearer",
    "OperatorCaller",
    "PanelCaller",
    "PresentedAgentKey",
    "RequestNow",
    "in_database_thread",
    "one_value",
    "services_of",
]

_Result = TypeVar("_Result")


def services_of(request: Request) -> Services:
    return cast(Services, request.app.state.services)


async def request_now(request: Request) -> datetime:
    """The instant the request arrived, read once from the server's clock (see `ServerTime`).

    `async` because it does no I/O: FastAPI would otherwise hand it to a worker thread, a cost
    every claim on the hot path would pay."""
    return cast(datetime, request.state.now)


def _scheme(audience: Audience, prefix: str) -> HTTPBearer:
    return HTTPBearer(
        scheme_name=audience.value,
        description=f"a {audience.value} key (`{prefix}…`) as `Authorization: Bearer …`",
        auto_error=False,
    )


_PANEL = _scheme(Audience.PANEL, PREFIXES[Audience.PANEL])
_AGENT = _scheme(Audience.AGENT, PREFIXES[Audience.AGENT])
_OPERATOR = _scheme(Audience.OPERATOR, PREFIXES[Audience.OPERATOR])
# A host with no agent yet presents an enrollment token: not an audience's credential, so it has
# a scheme of its own, judged by the enrollment service.
ENROLLMENT_SCHEME = "enrollment"
_ENROLLMENT = HTTPBearer(
    scheme_name=ENROLLMENT_SCHEME,
    description="an enrollment token (`nwe_…`) as `Authorization: Bearer …`",
    auto_error=False,
)

Bearer = HTTPAuthorizationCredentials | None


# The headers the routes read a value of (each as the contract spells it): the key, how the body
# is to be read, and the contract's.
AUTHORIZATION = "Authorization"
READ_HEADERS = (
    AUTHORIZATION,
    "Content-Type",
    HOST_ID_HEADER,
    TRUST_ROOT_VERSION_HEADER,
    HOST_TIME_HEADER,
    CONTRACT_VERSION_HEADER,
    "If-None-Match",
    "Range",
    "If-Range",
)


def said_once(request: Request) -> None:
    """The 422 for a request that says two different things: a header the routes read, or any
    query parameter, given twice with different values (`?channel=stable&channel=edge`).
    Serving it under one of them would be a guess; the same value twice says one thing. Checked
    before the key is, so nothing is read or recorded for such a request: two keys are one more
    such header, whatever their scheme (which of them the request stands on would be a guess).

    Judged for every request that presents a key (`said_once_with_a_key`): one without is the
    401, and learns nothing more. The contract's header is judged before that, key or none, by
    the contract's check (`agent_contract`), with these words."""
    for name in READ_HEADERS:
        one_value(name, request.headers.getlist(name))
    for name in dict.fromkeys(request.query_params.keys()):
        one_value(name, request.query_params.getlist(name))


def one_value(name: str, values: list[str]) -> None:
    """The 422 `invalid_request` for `values` of one header or parameter (in the order sent)
    that say two different things; nothing for none, one, or the same value again."""
    first = values[0] if values else None
    other = next((value for value in values if value != first), None)
    if other is not None and name == AUTHORIZATION:
        # Keys are never said back: an answer is logged where a key must not be.
        raise InvalidInput(
            name,
            None,
            "",
            message=f"{name}: two different keys in the same request (expected one key, or the "
            "same key again)",
            code="invalid_request",
        )
    if other is not None:
        raise InvalidInput(
            name,
            other,
            f"contradicts {quoted(first)} in the same request (expected one value, or the same "
            "value again)",
            code="invalid_request",
        )


def said_once_with_a_key(request: Request) -> None:
    """`said_once` for a request that carries an `Authorization` header at all (one, or more);
    nothing for one that does not."""
    if AUTHORIZATION in request.headers:
        said_once(request)


def _caller(request: Request, bearer: Bearer, audience: Audience) -> Principal:
    said_once_with_a_key(request)
    secret = None if bearer is None else bearer.credentials
    return services_of(request).accounts.authenticate(secret, audience)


# The agent's host id is read from the request rather than declared as a parameter: it is an
# optional, internal signal of the contract, and every agent endpoint takes it.
def agent_caller(request: Request, bearer: Annotated[Bearer, Security(_AGENT)]) -> Principal:
    said_once_with_a_key(request)
    secret = None if bearer is None else bearer.credentials
    return services_of(request).accounts.authenticate(
        secret,
        Audience.AGENT,
        host_id=request.headers.get(HOST_ID_HEADER),
        now=cast(datetime, request.state.now),
    )


def panel_caller(request: Request, bearer: Annotated[Bearer, Security(_PANEL)]) -> Principal:
    return _caller(request, bearer, Audience.PANEL)


def operator_caller(request: Request, bearer: Annotated[Bearer, Security(_OPERATOR)]) -> Principal:
    return _caller(request, bearer, Audience.OPERATOR)


@dataclass(frozen=True, kw_only=True)
class PresentedAgentKey:
    """An agent key as presented, not yet checked: the hot routes check it in the same statement
    that reads their data (`accounts.services.AGENT_OF_CREDENTIAL`), and fall back to
    `authenticate` for the 401/403 when that statement finds no agent."""

    secret: str
    secret_sha256: str
    host_id: str | None = None  # checked against HOST_ID_PATTERN

    def principal(self, services: Services) -> Principal:
        return services.accounts.authenticate(self.secret, Audience.AGENT)


async def agent_credential(
    request: Request,
    bearer: Annotated[Bearer, Security(_AGENT)],
) -> PresentedAgentKey:
    """No I/O, so `async`: a missing key is a 401 at once, before the body is looked at; a
    malformed host id is a 422 before anything is read or recorded."""
    said_once_with_a_key(request)
    if bearer is None:
        raise Unauthenticated("a bearer credential is required (Authorization: Bearer …)")
    host_id = request.headers.get(HOST_ID_HEADER)
    if host_id is not None:
        check_host_id(host_id)
    return PresentedAgentKey(
        secret=bearer.credentials, secret_sha256=secret_sha256(bearer.credentials), host_id=host_id
    )


async def in_database_thread(request: Request, work: Callable[[], _Result]) -> _Result:
    """Run blocking database work in a worker thread, at most as many at once as the pool has
    connections: more threads would only queue for a connection, each wake-up costing the GIL.

    The hot routes are `async` and make exactly this one thread hop; a `def` route with `def`
    dependencies makes one hop per dependency and one for the route."""
    state = request.app.state
    limiter: CapacityLimiter | None = getattr(state, "database_limiter", None)
    if limiter is None:
        # Created on first use, inside the serving event loop, which anyio requires.
        limiter = CapacityLimiter(state.database_threads)
        state.database_limiter = limiter
    return await anyio.to_thread.run_sync(work, limiter=limiter)


async def enrollment_token(
    request: Request, bearer: Annotated[Bearer, Security(_ENROLLMENT)]
) -> str | None:
    """The enrollment token as presented (None: none was); the exchange judges it, once the
    request says one thing (`said_once`)."""
    said_once_with_a_key(request)
    return None if bearer is None else bearer.credentials


AgentCredential = Annotated[PresentedAgentKey, Depends(agent_credential)]
EnrollmentBearer = Annotated[str | None, Depends(enrollment_token)]
PanelCaller = Annotated[Principal, Depends(panel_caller)]
AgentCaller = Annotated[Principal, Depends(agent_caller)]
OperatorCaller = Annotated[Principal, Depends(operator_caller)]
RequestNow = Annotated[datetime, Depends(request_now)]
