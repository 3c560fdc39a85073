"""Signing in and out, the language menu, and the panel's front door."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.accounts.credentials import Audience
from control_plane.panel import backend
from control_plane.panel.csrf import tokens_match
from control_plane.panel.i18n import LANGUAGES
from control_plane.panel.readers import Csrf
from control_plane.panel.web import (
    LANGUAGE_COOKIE,
    PREFIX,
    SESSION_COOKIE,
    SIGNIN_COOKIE,
    PanelContext,
    WholeNumber,
    context_of,
    csrf_ok,
    public_form_page,
    redirect,
    refused,
    safe_next,
)

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)

MAX_KEY_LENGTH = 200
ONE_YEAR = 365 * 24 * 3600


def home_of(ctx: PanelContext) -> str:
    if ctx.session is None:
        return f"{PREFIX}/sign-in"
    return f"{PREFIX}/operator" if ctx.session.audience is Audience.OPERATOR else f"{PREFIX}/agents"


@router.get("/")
def front_door(request: Request) -> Response:
    return redirect(home_of(context_of(request)))


def _signin_page(
    ctx: PanelContext,
    *,
    error: str | None = None,
    notice: str | None = None,
    person_error: str | None = None,
) -> Response:
    return public_form_page(
        ctx,
        "sign_in.html",
        status_code=401 if error or person_error else 200,
        error=error,
        notice=notice,
        person_error=person_error,
    )


@router.get("/sign-in")
def sign_in_form(
    request: Request,
    signed_out: WholeNumber = 0,
    ended: WholeNumber = 0,
    invited: WholeNumber = 0,
    new_password: WholeNumber = 0,
    expired: WholeNumber = 0,
    refused: str = "",
) -> Response:
    ctx = context_of(request)
    if ctx.session is not None:
        return redirect(home_of(ctx))
    notice = None
    if signed_out:
        notice = ctx.lang.gettext("You are signed out.")
    elif ended:
        notice = ctx.lang.gettext("Your session has ended. Please sign in again.")
    elif invited:
        notice = ctx.lang.gettext(
            "Your password is set. Sign in with your e-mail address and password; you then "
            "set up your authenticator app."
        )
    elif new_password:
        notice = ctx.lang.gettext(
            "Your new password is set. Sign in with your e-mail address and the new password."
        )
    person_error = None
    if expired:
        person_error = ctx.lang.gettext("This form had expired. Please try again.")
    elif refused == "wrong":
        person_error = ctx.lang.gettext("This e-mail address and password do not match.")
    elif refused == "locked":
        person_error = ctx.lang.gettext(
            "Too many wrong attempts: signing in is locked for 15 minutes."
        )
    elif refused == "expired":
        person_error = ctx.lang.gettext("That sign-in took too long. Please start again.")
    return _signin_page(ctx, notice=notice, person_error=person_error)


@router.post("/sign-in")
def sign_in(
    request: Request,
    key: Annotated[str, Form(max_length=MAX_KEY_LENGTH)] = "",
    csrf: Csrf = "",
) -> Response:
    ctx = context_of(request)
    if not tokens_match(request.cookies.get(SIGNIN_COOKIE), csrf):
        return _signin_page(ctx, error=ctx.lang.gettext("This form had expired. Please try again."))
    who = backend.authenticate(ctx.services, key.strip()) if key.strip() else None
    if who is None:
        return _signin_page(
            ctx,
            error=ctx.lang.gettext(
                "This key is not a panel or operator key we know, or it was revoked."
            ),
        )
    opened = backend.open_session(ctx.services, who, now=ctx.session_now)
    response = redirect(
        f"{PREFIX}/operator" if who.audience is Audience.OPERATOR else f"{PREFIX}/agents"
    )
    ctx.set_session_cookie(response, opened.secret)
    response.delete_cookie(SIGNIN_COOKIE, path=PREFIX)
    return response


@router.post("/sign-out")
def sign_out(request: Request, csrf: Csrf = "") -> Response:
    ctx = context_of(request)
    if ctx.session is None:
        return redirect(f"{PREFIX}/sign-in")
    if not csrf_ok(ctx, csrf):
        return refused(ctx)
    backend.close_session(ctx.services, ctx.session_secret)
    response = redirect(f"{PREFIX}/sign-in?signed_out=1")
    response.delete_cookie(SESSION_COOKIE, path=PREFIX)
    return response


@router.get("/language/{code}")
def choose_language(request: Request, code: str, next: str | None = None) -> Response:
    """Remember the reader's language (a year, across sign-outs) and go back where they were.

    A link, not a form: it changes only how the pages read, never anything stored for the
    organisation, so there is nothing for a forged request to gain."""
    target = safe_next(next)
    response = redirect(target)
    if code in LANGUAGES:
        response.set_cookie(
            LANGUAGE_COOKIE,
            code,
            max_age=ONE_YEAR,
            path=PREFIX,
            httponly=True,
            secure=request.url.scheme == "https",
            samesite="lax",
        )
    return response
