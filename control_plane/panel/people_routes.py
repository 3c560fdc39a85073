"""Named people: an editor invites a person (the link shown once), the person sets a password
through the link, and signs in as themselves in two steps — address and password, then a TOTP
code (set up at the first sign-in, its secret shown once). An editor also changes a person's
role, makes a new invitation link or a password reset link (`/panel/reset/<token>`, served like
an invitation), removes a person or the organisation's own sign-in provider; an operator
removes another operator.

The forms before a session exists carry the sign-in form's double-submit token (the
`SIGNIN_COOKIE`); the pending step between the two is its own short-lived cookie, so a half
signed-in browser holds no session."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.accounts.oidc import ADDRESS_REFUSED
from control_plane.accounts.passwords import MIN_PASSWORD, otpauth_uri
from control_plane.accounts.people import (
    INVITATION_LIFETIME,
    MAX_NAME,
    ROLES,
    InvitationRefused,
    PendingSignIn,
    SignInRefused,
)
from control_plane.errors import InvalidInput
from control_plane.panel import backend, oidc_routes, people_backend
from control_plane.panel.csrf import tokens_match
from control_plane.panel.form_refusal import not_an_address, not_plain, not_sent_by_form, too_long
from control_plane.panel.i18n import Language
from control_plane.panel.once import Once, made_once
from control_plane.panel.readers import Csrf, customer_of, customer_post, operator_of, operator_post
from control_plane.panel.web import (
    PREFIX,
    SIGNIN_COOKIE,
    PanelContext,
    context_of,
    page,
    public_form_page,
    redirect,
)
from ground.contract.plain_text import shown

__all__ = ["PENDING_COOKIE", "router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)

PENDING_COOKIE = "nw_panel_pending"
PENDING_SECONDS = 600
MAX_FIELD = 400
Field = Annotated[str, Form(max_length=MAX_FIELD)]
Secret = Annotated[str, Form(max_length=1000)]
Text = Annotated[str, Form(max_length=600)]


def _people_page(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    link: str | None = None,
    error_field: str | None = None,
    form: dict[str, str] | None = None,
    oidc_error: str | None = None,
    oidc_issuer: str | None = None,
    reset_link: bool = False,
    person_error: str | None = None,
    error_text: str | None = None,
    sent_again: bool = False,
) -> Response:
    assert ctx.session is not None and ctx.session.org_id is not None
    query = ctx.request.query_params
    return page(
        ctx,
        "people.html",
        provider=oidc_routes.provider_of(ctx, ctx.session.org_id),
        callback=oidc_routes.callback_uri(ctx),
        oidc_saved=query.get("oidc_saved") == "1",
        oidc_error=oidc_error or query.get("oidc_error"),
        oidc_issuer=oidc_issuer,
        # The refused address named in its refusal: its controls shown, not obeyed.
        oidc_issuer_quoted=shown(oidc_issuer or ""),
        removed=query.get("removed") == "1",
        role_changed=query.get("role_changed") == "1",
        oidc_removed=query.get("oidc_removed") == "1",
        reset_link=reset_link,
        person_error=person_error,
        error_text=error_text,
        sent_again=sent_again,
        status_code=status_code,
        people=people_backend.people(ctx.services, ctx.session.org_id),
        link=link,
        days=INVITATION_LIFETIME.days,
        error_field=error_field,
        form=form or {"name": "", "email": "", "role": "viewer"},
        roles=ROLES,
    )


@router.get("/people")
def people(request: Request) -> Response:
    ctx, _ = customer_of(request)
    return _people_page(ctx)


@router.post("/people")
def invite(
    request: Request,
    csrf: Csrf = "",
    name: Field = "",
    email: Field = "",
    role: Field = "",
    once: Once = "",
) -> Response:
    post = customer_post(request, csrf)
    ctx = post.ctx
    form = {"name": name, "email": email, "role": role}
    try:
        issued = made_once(
            ctx.services,
            once,
            lambda: people_backend.invite(
                ctx.services,
                post.org_id,
                name=name,
                email=email,
                role=role,
                actor=post.actor,
                now=ctx.now,
            ),
            now=ctx.now,
        )
    except backend.Refused as exc:
        field = exc.field if exc.field in {"name", "email", "role", "email_taken"} else "name"
        text = _person_problem(ctx.lang, field, form)
        return _people_page(ctx, status_code=422, error_field=field, error_text=text, form=form)
    if issued is None:  # the form made its link already (`once.py`)
        return _people_page(ctx, status_code=409, sent_again=True)
    return _people_page(ctx, link=_link(ctx, issued.token, reset=False))


@router.post("/people/{person_id}/remove")
def remove(request: Request, person_id: str, csrf: Csrf = "") -> Response:
    post = customer_post(request, csrf, person_id)
    ctx, (parsed,) = post.ctx, post.ids
    try:
        people_backend.remove(ctx.services, post.org_id, parsed, actor=post.actor, now=ctx.now)
    except backend.Refused as exc:
        return _people_page(ctx, status_code=409, person_error=exc.field)
    return redirect(f"{PREFIX}/people?removed=1")


@router.post("/people/{person_id}/role")
def change_role(request: Request, person_id: str, csrf: Csrf = "", role: Field = "") -> Response:
    post = customer_post(request, csrf, person_id)
    ctx, (parsed,) = post.ctx, post.ids
    try:
        people_backend.change_role(
            ctx.services, post.org_id, parsed, role, actor=post.actor, now=ctx.now
        )
    except backend.Refused as exc:
        if exc.field == "last_editor":
            return _people_page(ctx, status_code=409, person_error=exc.field)
        text = not_sent_by_form(ctx.lang, "role", role)
        return _people_page(ctx, status_code=422, person_error="role", error_text=text)
    return redirect(f"{PREFIX}/people?role_changed=1")


def _person_problem(lang: Language, field: str, form: dict[str, str]) -> str | None:
    """What is wrong with an invitation's refused field, with the value as typed; None where the
    page's own sentence says it (nothing given, an address taken)."""
    value = form.get(field, "")
    if field == "role":
        return not_sent_by_form(lang, "role", value)
    if field not in {"name", "email"}:
        return None
    if field == "name" and len(value.strip()) > MAX_NAME:
        return too_long(lang, "name", value.strip(), MAX_NAME)
    plain = not_plain(lang, field, value)
    if plain is not None:
        return plain
    return not_an_address(lang, value) if field == "email" and value.strip() else None


def _reissued(request: Request, person_id: str, csrf: str, once: str, *, reset: bool) -> Response:
    post = customer_post(request, csrf, person_id)
    ctx, (parsed,) = post.ctx, post.ids
    try:
        # A resend makes no other link (which would end the link shown, or a password the
        # person set through it meanwhile).
        issued = made_once(
            ctx.services,
            once,
            lambda: people_backend.reissue(
                ctx.services, post.org_id, parsed, reset=reset, actor=post.actor, now=ctx.now
            ),
            now=ctx.now,
        )
    except backend.Refused as exc:
        return _people_page(ctx, status_code=409, person_error=exc.field)
    if issued is None:  # the form made its link already (`once.py`)
        return _people_page(ctx, status_code=409, sent_again=True)
    return _people_page(ctx, link=_link(ctx, issued.token, reset=reset), reset_link=reset)


def _link(ctx: PanelContext, token: str, *, reset: bool) -> str:
    base = str(ctx.request.base_url).rstrip("/")
    return f"{base}{PREFIX}/{'reset' if reset else 'invitation'}/{token}"


@router.post("/people/{person_id}/invitation")
def new_invitation(request: Request, person_id: str, csrf: Csrf = "", once: Once = "") -> Response:
    """A new link for a person who has not used theirs; the earlier link dies."""
    return _reissued(request, person_id, csrf, once, reset=False)


@router.post("/people/{person_id}/reset")
def reset_password(request: Request, person_id: str, csrf: Csrf = "", once: Once = "") -> Response:
    """The person's password and sessions end now; the link lets them choose a new password
    (their TOTP is kept: the link alone signs nobody in)."""
    return _reissued(request, person_id, csrf, once, reset=True)


@router.post("/people/oidc")
def save_provider(
    request: Request,
    csrf: Csrf = "",
    issuer: Text = "",
    client_id: Text = "",
    client_secret: Text = "",
    action: Field = "",
) -> Response:
    """Save the provider; with `action=remove`, remove it (its sessions end)."""
    post = customer_post(request, csrf)
    ctx = post.ctx
    if action == "remove":
        people_backend.remove_provider(ctx.services, post.org_id, actor=post.actor, now=ctx.now)
        return redirect(f"{PREFIX}/people?oidc_removed=1")
    try:
        ctx.services.oidc.put(
            post.org_id,
            issuer=issuer,
            client_id=client_id,
            client_secret=client_secret,
            now=ctx.now,
            actor=post.actor,
        )
    except InvalidInput as exc:
        if exc.code == ADDRESS_REFUSED:
            # Shown at once, not redirected to: the message names the refused address.
            return _people_page(ctx, status_code=422, oidc_error="address", oidc_issuer=issuer)
        field = str(exc.fields.get("field"))
        return redirect(f"{PREFIX}/people?oidc_error={'issuer' if field == 'issuer' else 'client'}")
    return redirect(f"{PREFIX}/people?oidc_saved=1")


def _invitation_refused(ctx: PanelContext, reason: str) -> Response:
    return page(ctx, "invitation_refused.html", status_code=410, reason=reason)


@router.get("/invitation/{token}")
@router.get("/reset/{token}")
def invitation(request: Request, token: str) -> Response:
    ctx = context_of(request)
    try:
        person = people_backend.invitation(ctx.services, token, now=ctx.now)
    except InvitationRefused as exc:
        return _invitation_refused(ctx, exc.reason)
    return public_form_page(ctx, "invitation.html", person=person, min_password=MIN_PASSWORD)


@router.post("/invitation/{token}")
@router.post("/reset/{token}")
def accept_invitation(
    request: Request,
    token: str,
    csrf: Csrf = "",
    password: Secret = "",
    repeated: Secret = "",
) -> Response:
    ctx = context_of(request)
    try:
        person = people_backend.invitation(ctx.services, token, now=ctx.now)
    except InvitationRefused as exc:
        return _invitation_refused(ctx, exc.reason)
    error = None
    if not tokens_match(request.cookies.get(SIGNIN_COOKIE), csrf):
        error = "expired_form"
    elif password != repeated:
        error = "mismatch"
    else:
        try:
            people_backend.accept_invitation(ctx.services, token, password, now=ctx.now)
        except InvitationRefused as exc:
            return _invitation_refused(ctx, exc.reason)
        except backend.Refused:
            error = "short"
    if error is not None:
        return public_form_page(
            ctx,
            "invitation.html",
            status_code=422,
            person=person,
            min_password=MIN_PASSWORD,
            error=error,
        )
    # A reset link (its own path) leads to its own word on the sign-in page.
    reset = request.url.path.startswith(f"{PREFIX}/reset/")
    return redirect(f"{PREFIX}/sign-in?{'new_password' if reset else 'invited'}=1")


def _code_page(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    pending: PendingSignIn | None = None,
    error: str | None = None,
    pending_secret: str | None = None,
) -> Response:
    setup = None
    if pending is not None and pending.totp_secret is not None:
        setup = {
            "secret": pending.totp_secret,
            "uri": otpauth_uri(pending.totp_secret, pending.person.email),
        }
    response = public_form_page(
        ctx, "sign_in_code.html", status_code=status_code, setup=setup, error=error
    )
    if pending_secret is not None:
        response.set_cookie(
            PENDING_COOKIE,
            pending_secret,
            max_age=PENDING_SECONDS,
            path=PREFIX,
            httponly=True,
            secure=ctx.secure,
            samesite="strict",
        )
    return response


@router.post("/sign-in/person")
def sign_in_person(
    request: Request, csrf: Csrf = "", email: Field = "", password: Secret = ""
) -> Response:
    """The first step: the address and password. The next page asks for the code (and, at the
    first sign-in, shows the TOTP secret to set up, this once)."""
    ctx = context_of(request)
    if not tokens_match(request.cookies.get(SIGNIN_COOKIE), csrf):
        return redirect(f"{PREFIX}/sign-in?expired=1")
    try:
        pending = people_backend.sign_in(ctx.services, email, password, now=ctx.session_now)
    except SignInRefused as exc:
        return redirect(f"{PREFIX}/sign-in?refused={exc.reason}")
    return _code_page(ctx, pending=pending, pending_secret=pending.secret)


@router.post("/sign-in/code")
def sign_in_code(request: Request, csrf: Csrf = "", code: Field = "") -> Response:
    ctx = context_of(request)
    pending_secret = request.cookies.get(PENDING_COOKIE)
    if not tokens_match(request.cookies.get(SIGNIN_COOKIE), csrf):
        return _code_page(ctx, status_code=401, error="expired_form")
    try:
        opened = people_backend.verify_code(ctx.services, pending_secret, code, now=ctx.session_now)
    except SignInRefused as exc:
        if exc.reason in {"expired", "locked"}:
            response = redirect(f"{PREFIX}/sign-in?refused={exc.reason}")
            response.delete_cookie(PENDING_COOKIE, path=PREFIX)
            return response
        return _code_page(ctx, status_code=401, error=exc.reason)
    # The front door leads an operator to the operators' pages, anyone else to the agents.
    response = redirect(f"{PREFIX}/")
    ctx.set_session_cookie(response, opened.secret)
    response.delete_cookie(PENDING_COOKIE, path=PREFIX)
    response.delete_cookie(SIGNIN_COOKIE, path=PREFIX)
    return response


def _operators_page(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    link: str | None = None,
    error_field: str | None = None,
    form: dict[str, str] | None = None,
    error_text: str | None = None,
    sent_again: bool = False,
) -> Response:
    return page(
        ctx,
        "operator_people.html",
        status_code=status_code,
        error_text=error_text,
        sent_again=sent_again,
        removed=ctx.request.query_params.get("removed") == "1",
        people=people_backend.people(ctx.services, None),
        link=link,
        days=INVITATION_LIFETIME.days,
        error_field=error_field,
        form=form or {"name": "", "email": ""},
    )


@router.get("/operator/people")
def operators(request: Request) -> Response:
    return _operators_page(operator_of(request))


@router.post("/operator/people")
def invite_operator(
    request: Request, csrf: Csrf = "", name: Field = "", email: Field = "", once: Once = ""
) -> Response:
    """An operator invites another, named: they sign in as themselves (password and TOTP)."""
    post = operator_post(request, csrf)
    ctx = post.ctx
    form = {"name": name, "email": email}
    try:
        issued = made_once(
            ctx.services,
            once,
            lambda: people_backend.invite(
                ctx.services,
                None,
                name=name,
                email=email,
                role="operator",
                actor=post.actor,
                now=ctx.now,
            ),
            now=ctx.now,
        )
    except backend.Refused as exc:
        field = exc.field if exc.field in {"name", "email", "email_taken"} else "name"
        text = _person_problem(ctx.lang, field, form)
        return _operators_page(ctx, status_code=422, error_field=field, error_text=text, form=form)
    if issued is None:  # the form made its link already (`once.py`)
        return _operators_page(ctx, status_code=409, sent_again=True)
    return _operators_page(ctx, link=_link(ctx, issued.token, reset=False))


@router.post("/operator/people/{person_id}/remove")
def remove_operator(request: Request, person_id: str, csrf: Csrf = "") -> Response:
    """An operator removes a named operator (themselves too): they sign in no more, their
    sessions end. The operators' keys are untouched, so the platform keeps an operator."""
    post = operator_post(request, csrf, person_id)
    ctx, (parsed,) = post.ctx, post.ids
    people_backend.remove(ctx.services, None, parsed, actor=post.actor, now=ctx.now)
    return redirect(f"{PREFIX}/operator/people?removed=1")
