"""Who reads a panel page, and the checks every form post makes before it changes anything.

`customer_of` / `operator_of`: the request's context for a signed-in customer (with its
organisation) or operator; a reader who may not be here is turned away (`TurnedAway`, answered
by the panel's exception handler: sign in again, or "not found" for the other audience).
`customer_post` / `operator_post` add what every form does next, in this order: the ids in the
path (a malformed one is "not found"), then the CSRF token (a wrong one is "refused"), then, for a
customer, the role (a viewer sees and changes nothing: "viewers do not change") — one place,
so no form can forget a step or take them in another order, and no route can forget to stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from uuid import UUID

from fastapi import Form, Request
from fastapi.responses import Response

from control_plane.accounts.credentials import Audience
from control_plane.accounts.sessions import PanelSession
from control_plane.events.trail import Actor
from control_plane.panel.backend import session_actor
from control_plane.panel.web import (
    PREFIX,
    SESSION_COOKIE,
    PanelContext,
    context_of,
    csrf_ok,
    not_found,
    page,
    redirect,
    refused,
)

__all__ = [
    "Csrf",
    "CustomerPost",
    "OperatorPost",
    "TurnedAway",
    "customer_of",
    "customer_post",
    "operator_of",
    "operator_post",
    "parse_id",
    "sign_in_again",
]

# Every form's hidden CSRF field.
Csrf = Annotated[str, Form(max_length=200)]


class TurnedAway(Exception):
    """The reader may not go on: `answer` is the page or redirect they get instead. Raised by the
    checks below, answered as it is by the panel's exception handler (`mount_panel`)."""

    def __init__(self, answer: Response) -> None:
        super().__init__(answer.status_code)
        self.answer = answer


@dataclass(frozen=True, kw_only=True)
class OperatorPost:
    """A form post that passed the checks: its reader, the ids from its path in the order given,
    and the session that signs what it changes."""

    ctx: PanelContext
    ids: tuple[UUID, ...]
    session: PanelSession

    @property
    def actor(self) -> Actor:
        """Who the trail names for what this form changes."""
        return session_actor(self.session)


@dataclass(frozen=True, kw_only=True)
class CustomerPost(OperatorPost):
    """The same for a customer, with their organisation."""

    org_id: UUID


def parse_id(text: str) -> UUID | None:
    try:
        return UUID(text)
    except ValueError:
        return None


def sign_in_again(request: Request) -> Response:
    """Where a reader without a session is sent: the sign-in page (saying so when the browser
    still holds a session that ended)."""
    ended = bool(request.cookies.get(SESSION_COOKIE))  # there was a session, and it ended
    return redirect(f"{PREFIX}/sign-in" + ("?ended=1" if ended else ""))


def customer_of(request: Request) -> tuple[PanelContext, UUID]:
    """The request's context and organisation; a reader who may not be here is turned away."""
    ctx = context_of(request)
    if ctx.session is None:
        raise TurnedAway(sign_in_again(request))
    if ctx.session.audience is not Audience.PANEL or ctx.session.org_id is None:
        raise TurnedAway(not_found(ctx))
    return ctx, ctx.session.org_id


def operator_of(request: Request) -> PanelContext:
    """The request's context; a reader who is not a signed-in operator is turned away."""
    ctx = context_of(request)
    if ctx.session is None:
        raise TurnedAway(redirect(f"{PREFIX}/sign-in"))
    if ctx.session.audience is not Audience.OPERATOR:
        raise TurnedAway(not_found(ctx))
    return ctx


def customer_post(request: Request, csrf: str, *ids: str) -> CustomerPost:
    ctx, org_id = customer_of(request)
    found, session = _checked(ctx, csrf, ids, known=True)
    if not session.may_change:
        raise TurnedAway(page(ctx, "viewer_refused.html", status_code=403))
    return CustomerPost(ctx=ctx, ids=found, session=session, org_id=org_id)


def operator_post(request: Request, csrf: str, *ids: str, known: bool = True) -> OperatorPost:
    """`known`: False for an action the form does not offer — not found, like a bad id."""
    ctx = operator_of(request)
    found, session = _checked(ctx, csrf, ids, known=known)
    return OperatorPost(ctx=ctx, ids=found, session=session)


def _checked(
    ctx: PanelContext, csrf: str, ids: tuple[str, ...], *, known: bool
) -> tuple[tuple[UUID, ...], PanelSession]:
    parsed = [parse_id(text) for text in ids]
    found = tuple(uuid for uuid in parsed if uuid is not None)
    if len(found) != len(parsed) or not known:
        raise TurnedAway(not_found(ctx))
    if not csrf_ok(ctx, csrf):
        raise TurnedAway(refused(ctx))
    assert ctx.session is not None  # csrf_ok holds only with a session
    return found, ctx.session
