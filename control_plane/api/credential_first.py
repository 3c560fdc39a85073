"""The credential before the body: a request whose body or query cannot be read is answered
401/403 when its credential is not good for its route, and 422 `invalid_request` only when it is.

FastAPI decodes and validates the body before it calls a route's dependencies, and the hot agent
routes check the key only in their own statement (`PresentedAgentKey`), so without this a caller
with no key, another audience's key or a made-up one learnt the rules of the body — the field
names, their limits and the values it sent back — from the 422. The check runs only on that
error path: a request that validates is authenticated by its route as before, at no extra cost.

Which credential a route takes, and how its key is read, is the route's own bearer scheme among
its dependencies (one per audience, named after it, and the enrollment token's:
`control_plane.api.deps`), so a new route is covered by declaring its caller as every route does;
`tests/control_plane/api/test_credential_first.py` walks every route to hold that.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer

from control_plane.accounts.credentials import Audience
from control_plane.api import deps
from control_plane.errors import RequestRefused

__all__ = ["credential_refusal"]

_AUDIENCES = {audience.value: audience for audience in Audience}
_SCHEMES = {*_AUDIENCES, deps.ENROLLMENT_SCHEME}


def _scheme_in(dependant: Any) -> HTTPBearer | None:
    """The bearer scheme among a route's dependencies (each audience has its own, named after it:
    `control_plane.api.deps`)."""
    for dependency in dependant.dependencies:
        call = dependency.call
        if isinstance(call, HTTPBearer) and call.scheme_name in _SCHEMES:
            return call
        found = _scheme_in(dependency)
        if found is not None:
            return found
    return None


def _route_scheme(route: object) -> HTTPBearer | None:
    # Walked each time: only the error path asks, and a route's dependencies are a few deep.
    return _scheme_in(route.dependant) if isinstance(route, APIRoute) else None


async def credential_refusal(request: Request) -> RequestRefused | None:
    """The 401/403 the route would give this request's credential, or None when it is good (or
    the route takes none), or the 422 of a request with a key that says two things
    (`deps.said_once`). The key is read by the route's own bearer scheme. A database that
    cannot be asked raises `psycopg.OperationalError`."""
    scheme = _route_scheme(request.scope.get("route"))
    if scheme is None:
        return None
    try:
        # Two keys (or two of another header the routes read): no one credential to judge.
        deps.said_once_with_a_key(request)
    except RequestRefused as refused:
        return refused
    bearer = await scheme(request)
    secret = None if bearer is None else bearer.credentials
    services = deps.services_of(request)
    name = scheme.scheme_name

    def check() -> None:
        if name == deps.ENROLLMENT_SCHEME:
            services.enrollment.check_presented(secret)
        else:
            services.accounts.authenticate(secret, _AUDIENCES[name])

    try:
        await deps.in_database_thread(request, check)
    except RequestRefused as refused:
        return refused
    return None
