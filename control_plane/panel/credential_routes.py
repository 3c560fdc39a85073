"""The operators' credentials: the panel and operator keys listed by name, a new key issued with a
name, a key rotated (the new secret shown once, the old one refused at once) or revoked after a
confirmation page. The accounts domain's lifecycle services do the work; an agent's key is rotated
with its agent, not here."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.accounts.credentials import Audience
from control_plane.accounts.services import IssuedCredential
from control_plane.panel import backend, operator_backend, rollout_backend
from control_plane.panel.form_refusal import not_plain
from control_plane.panel.once import Once, made_once
from control_plane.panel.readers import Csrf, operator_of, operator_post, parse_id
from control_plane.panel.web import PREFIX, PanelContext, WholeNumber, not_found, page, redirect

__all__ = ["router"]

router = APIRouter(prefix=PREFIX + "/operator", include_in_schema=False)


def _credentials_page(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    issued: IssuedCredential | None = None,
    error_field: str | None = None,
    form: dict[str, str] | None = None,
    show_revoked: bool = False,
    revoked: bool = False,
    sent_again: bool = False,
    error_text: str | None = None,
) -> Response:
    listed = operator_backend.credentials(ctx.services, include_revoked=show_revoked)
    return page(
        ctx,
        "credentials.html",
        status_code=status_code,
        credentials=listed,
        issued=issued,
        error_field=error_field,
        form=form or {"audience": "operator", "name": "", "org_id": ""},
        show_revoked=show_revoked,
        revoked=revoked,
        sent_again=sent_again,
        error_text=error_text,
        own_credential=ctx.session.credential_id if ctx.session else None,
        org_names=rollout_backend.org_names(ctx.services),
        zone=backend.platform(ctx.services).zone,
    )


@router.get("/credentials")
def credentials(request: Request, all: WholeNumber = 0, revoked: WholeNumber = 0) -> Response:
    ctx = operator_of(request)
    return _credentials_page(ctx, show_revoked=bool(all), revoked=bool(revoked))


@router.post("/credentials")
def issue(
    request: Request,
    csrf: Csrf = "",
    audience: Annotated[str, Form(max_length=20)] = "operator",
    name: Annotated[str, Form(max_length=300)] = "",
    org_id: Annotated[str, Form(max_length=100)] = "",
    once: Once = "",
) -> Response:
    post = operator_post(request, csrf)
    ctx = post.ctx
    form = {"audience": audience, "name": name, "org_id": org_id}
    kind = Audience.PANEL if audience == "panel" else Audience.OPERATOR
    org: UUID | None = None
    if kind is Audience.PANEL:
        org = parse_id(org_id.strip())
        if org is None:
            return _credentials_page(ctx, status_code=422, error_field="org_id", form=form)
    try:
        issued = made_once(
            ctx.services,
            once,
            lambda: operator_backend.issue_credential(
                ctx.services, audience=kind, name=name, org_id=org, actor=post.actor, now=ctx.now
            ),
            now=ctx.now,
        )
    except backend.Refused as exc:
        field = exc.field if exc.field in {"name", "org_id"} else "name"
        # A name with a control character was given: said as such, not as a missing name.
        text = not_plain(ctx.lang, "name", name) if field == "name" else None
        return _credentials_page(
            ctx, status_code=422, error_field=field, error_text=text, form=form
        )
    return _secret_shown(ctx, issued)


@router.post("/credentials/{credential_id}/rotate")
def rotate(request: Request, credential_id: str, csrf: Csrf = "", once: Once = "") -> Response:
    post = operator_post(request, csrf, credential_id)
    ctx, (parsed,) = post.ctx, post.ids
    try:
        issued = made_once(
            ctx.services,
            once,
            lambda: operator_backend.rotate_credential(
                ctx.services, parsed, actor=post.actor, now=ctx.now
            ),
            now=ctx.now,
        )
    except backend.Refused:
        return _credentials_page(ctx, status_code=409, error_field="credential")
    return _secret_shown(ctx, issued)


def _secret_shown(ctx: PanelContext, issued: IssuedCredential | None) -> Response:
    """The new secret, shown once; None: the form made its secret already (`once.py`)."""
    if issued is None:
        return _credentials_page(ctx, status_code=409, sent_again=True)
    return _credentials_page(ctx, issued=issued)


@router.get("/credentials/{credential_id}/revoke")
def confirm_revoke(request: Request, credential_id: str) -> Response:
    """The confirmation: a revoked key is refused from the next request on, for good."""
    ctx = operator_of(request)
    parsed = parse_id(credential_id)
    if parsed is None:
        return not_found(ctx)
    found = operator_backend.credential(ctx.services, parsed)
    return page(
        ctx,
        "revoke_credential.html",
        credential=found,
        own=ctx.session is not None and ctx.session.credential_id == found.id,
    )


@router.post("/credentials/{credential_id}/revoke")
def revoke(request: Request, credential_id: str, csrf: Csrf = "") -> Response:
    post = operator_post(request, csrf, credential_id)
    ctx, (parsed,) = post.ctx, post.ids
    operator_backend.revoke_credential(ctx.services, parsed, actor=post.actor, now=ctx.now)
    return redirect(f"{PREFIX}/operator/credentials?revoked=1")
