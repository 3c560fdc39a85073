"""A customer's enrollment tokens: make one (its secret and the host's install line shown once,
ready to copy), list them with their uses left, expiry and state, and revoke one."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import Response

from control_plane.enrollment.rules import (
    DEFAULT_EXPIRES_IN,
    DEFAULT_USES,
    MAX_EXPIRES_IN,
    MAX_LABEL_LENGTH,
    MAX_PATTERN_LENGTH,
    MAX_USES,
    install_command,
    trust_file,
)
from control_plane.enrollment.services import IssuedEnrollmentToken
from control_plane.panel import backend, customer_backend
from control_plane.panel.form_refusal import not_plain, not_text, not_whole_in_range, too_long
from control_plane.panel.i18n import Language
from control_plane.panel.once import Once, made_once
from control_plane.panel.readers import Csrf, customer_of, customer_post
from control_plane.panel.web import PREFIX, PanelContext, WholeNumber, page, redirect, whole_number

__all__ = ["router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)

_HOUR = timedelta(hours=1)
MAX_HOURS = MAX_EXPIRES_IN // _HOUR
_FIELDS = {"uses", "expires_in", "name_pattern", "label"}


def _tokens_page(
    ctx: PanelContext,
    *,
    status_code: int = 200,
    issued: IssuedEnrollmentToken | None = None,
    error_field: str | None = None,
    error_text: str | None = None,
    form: dict[str, str] | None = None,
    revoked: bool = False,
    sent_again: bool = False,
) -> Response:
    assert ctx.session is not None and ctx.session.org_id is not None
    listed = customer_backend.enrollment_tokens(ctx.services, ctx.session.org_id, now=ctx.now)
    # The control plane as the reader reached it: the address hosts reach it at, as a rule.
    url = str(ctx.request.base_url).rstrip("/")
    newest_root = None if issued is None else customer_backend.newest_trust_root(ctx.services)
    return page(
        ctx,
        "enrollment.html",
        status_code=status_code,
        tokens=listed.tokens,
        issued=issued,
        install_line=None if issued is None else install_command(url, issued.secret, newest_root),
        trust_file=trust_file(newest_root),
        error_field=error_field,
        error_text=error_text,
        form=form
        or {
            "uses": str(DEFAULT_USES),
            "hours": str(DEFAULT_EXPIRES_IN // _HOUR),
            "name_pattern": "",
            "label": "",
        },
        revoked=revoked,
        sent_again=sent_again,
        max_uses=MAX_USES,
        max_hours=MAX_HOURS,
        max_text=min(MAX_LABEL_LENGTH, MAX_PATTERN_LENGTH),
        zone=backend.platform(ctx.services).zone,
    )


@router.get("/enrollment")
def tokens(request: Request, revoked: WholeNumber = 0) -> Response:
    ctx, _ = customer_of(request)
    return _tokens_page(ctx, revoked=bool(revoked))


@router.post("/enrollment")
def create(
    request: Request,
    csrf: Csrf = "",
    uses: Annotated[str, Form(max_length=20)] = "",
    hours: Annotated[str, Form(max_length=20)] = "",
    name_pattern: Annotated[str, Form(max_length=300)] = "",
    label: Annotated[str, Form(max_length=300)] = "",
    once: Once = "",
) -> Response:
    post = customer_post(request, csrf)
    ctx = post.ctx
    form = {"uses": uses, "hours": hours, "name_pattern": name_pattern, "label": label}
    count = whole_number(uses.strip())
    lifetime = whole_number(hours.strip())
    if count is None:
        return _refused(ctx, "uses", form)
    if lifetime is None or not 1 <= lifetime <= MAX_HOURS:
        return _refused(ctx, "expires_in", form)
    try:
        issued = made_once(
            ctx.services,
            once,
            lambda: customer_backend.create_enrollment_token(
                ctx.services,
                post.org_id,
                uses=count,
                expires_in=lifetime * _HOUR,
                name_pattern=name_pattern.strip() or None,
                label=label.strip() or None,
                actor=post.actor,
                now=ctx.now,
            ),
            now=ctx.now,
        )
    except backend.Refused as exc:
        return _refused(ctx, exc.field if exc.field in _FIELDS else "label", form)
    if issued is None:  # the form made its token already (`once.py`)
        return _tokens_page(ctx, status_code=409, sent_again=True)
    return _tokens_page(ctx, issued=issued)


def _refused(ctx: PanelContext, field: str, form: dict[str, str]) -> Response:
    """The form again with `field` refused next to it: the value typed and what is expected."""
    return _tokens_page(
        ctx,
        status_code=422,
        error_field=field,
        error_text=_term_problem(ctx.lang, field, form),
        form=form,
    )


def _term_problem(lang: Language, field: str, form: dict[str, str]) -> str:
    if field == "uses":
        return not_whole_in_range(lang, "uses", form["uses"].strip(), 1, MAX_USES)
    if field == "expires_in":
        return not_whole_in_range(lang, "hours", form["hours"].strip(), 1, MAX_HOURS)
    typed = form[field].strip()
    limit = MAX_PATTERN_LENGTH if field == "name_pattern" else MAX_LABEL_LENGTH
    if len(typed) > limit:
        return too_long(lang, field, typed, limit)
    return not_plain(lang, field, typed) or not_text(lang, field, typed, limit)


@router.post("/enrollment/{token_id}/revoke")
def revoke(request: Request, token_id: str, csrf: Csrf = "") -> Response:
    post = customer_post(request, csrf, token_id)
    ctx, (parsed,) = post.ctx, post.ids
    customer_backend.revoke_enrollment_token(
        ctx.services, post.org_id, parsed, actor=post.actor, now=ctx.now
    )
    return redirect(f"{PREFIX}/enrollment?revoked=1")
