"""A route that takes no body refuses one: a request that carries a body it does not define gets
a 422 `invalid_request` naming what was found, instead of an answer that silently ignored it.

A client that sends a body expects it to mean something (a run for another agent, a version to
install); answering 201 as if it had been read would tell it so. Declared as the route's last
parameter, after its caller, so the credential is still judged first (401/403 before the 422,
as `credential_first` keeps for every other 422). A body above the size limit never gets here:
`limits.RequestLimits` answers 413 before any route runs.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from control_plane.errors import InvalidInput
from ground.contract import AnswerCode

__all__ = ["NoBody", "refuse_a_body"]


async def refuse_a_body(request: Request) -> None:
    body = await request.body()
    if not body:
        return
    raise InvalidInput(
        "body",
        body.decode("utf-8", errors="replace"),
        f"({len(body)} bytes) — expected no body: {request.method} {request.url.path} takes "
        "none (what it acts on is in its path and credential)",
        code=AnswerCode.INVALID_REQUEST.value,
    )


NoBody = Annotated[None, Depends(refuse_a_body)]
