"""Request-scoped inputs for the routes: the caller, the services, the request's instant."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, cast

from fastapi import Depends, Header, Request

from control_plane.credentials import Audience, bearer_secret
from control_plane.services import Principal, Services

__all__ = ["AgentCaller", "OperatorCaller", "PanelCaller", "RequestNow", "services_of"]


def services_of(request: Request) -> Services:
    return cast(Services, request.app.state.services)


async def request_now(request: Request) -> datetime:
    """The instant the request arrived, read once from the server's clock (see `ServerTime`).

    `async` because it does no I/O: FastAPI would otherwise hand it to a worker thread, a cost
    every claim on the hot path would pay."""
    return cast(datetime, request.state.now)


def _caller(request: Request, authorization: str | None, audience: Audience) -> Principal:
    return services_of(request).accounts.authenticate(bearer_secret(authorization), audience)


def panel_caller(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Principal:
    return _caller(request, authorization, Audience.PANEL)


def agent_caller(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Principal:
    return _caller(request, authorization, Audience.AGENT)


def operator_caller(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Principal:
    return _caller(request, authorization, Audience.OPERATOR)


PanelCaller = Annotated[Principal, Depends(panel_caller)]
AgentCaller = Annotated[Principal, Depends(agent_caller)]
OperatorCaller = Annotated[Principal, Depends(operator_caller)]
RequestNow = Annotated[datetime, Depends(request_now)]
