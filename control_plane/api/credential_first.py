"""The credential before the body: a request whose body or query cannot be read is answered
401/403 when its credential is not good for its route, and 422 `invalid_request` only when it is.

FastAPI decodes and validates the body before it calls a route's dependencies, and the hot agent
routes check the key only in their own statement (`PresentedAgentKey`), so without this a caller
with no key, another audience's key or a made-up one learnt the rules of the body — the field
names, their limits and the values it sent back — from the 422. The check runs only on that
error path: a request that validates is authenticated by its route as before, at no extra cost.

Which credential a route takes is read from its dependencies (the callables of
`control_plane.api.deps`), so a new route is covered by declaring its caller as every route does;
`tests/control_plane/api/test_credential_first.py` walks every route to hold that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute

from control_plane.accounts.credentials import Audience
from control_plane.api import deps
from control_plane.errors import RequestRefused

__all__ = ["credential_refusal", "route_audience"]

_AUDIENCE_OF: dict[Callable[..., Any], Audience] = {
    deps.agent_credential: Audience.AGENT,
    deps.agent_caller: Audience.AGENT,
    deps.panel_caller: Audience.PANEL,
    deps.operator_caller: Audience.OPERATOR,
}


def _audience_in(dependant: Any) -> Audience | None:
    for dependency in dependant.dependencies:
        audience = _AUDIENCE_OF.get(dependency.call) or _audience_in(dependency)
        if audience is not None:
            return audience
    return None


def route_audience(route: object) -> Audience | None:
    """The audience whose key `route` takes; None for a route without a credential. Walked each
    time: only the error path asks, and a route's dependencies are a few levels deep."""
    if not isinstance(route, APIRoute):
        return None
    return _audience_in(route.dependant)


def _bearer_secret(request: Request) -> str | None:
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    return secret if scheme.lower() == "bearer" and secret else None


async def credential_refusal(request: Request) -> RequestRefused | None:
    """The 401/403 the route would give this request's credential, or None when it is good (or
    the route takes none). A database that cannot be asked raises `psycopg.OperationalError`."""
    audience = route_audience(request.scope.get("route"))
    if audience is None:
        return None
    accounts = deps.services_of(request).accounts
    secret = _bearer_secret(request)
    try:
        await deps.in_database_thread(request, lambda: accounts.authenticate(secret, audience))
    except RequestRefused as refused:
        return refused
    return None
