"""Signing in through the organisation's own OpenID Connect provider, and setting it up.

An editor saves the provider (issuer, client id, client secret) on the people page (its form and
route are the people page's, `people_routes`); the page then
shows the organisation's sign-in address, `/panel/oidc/start/<organisation>`, and the redirect
address to register at the provider, `/panel/oidc/callback`. Between the two the browser carries
the flow's state, nonce and PKCE verifier in a short-lived cookie of its own: SameSite=Lax, since
the way back is a navigation from the provider's site, which a Strict cookie would not join."""

from __future__ import annotations

import logging
from uuid import UUID

from fastapi import APIRouter, Request
from fastapi.responses import Response

from control_plane.accounts.oidc import FlowState, OidcFailed
from control_plane.panel.readers import parse_id
from control_plane.panel.web import PREFIX, PanelContext, context_of, page, redirect

__all__ = ["FLOW_COOKIE", "router"]

router = APIRouter(prefix=PREFIX, include_in_schema=False)
log = logging.getLogger(__name__)

FLOW_COOKIE = "nw_panel_oidc"
FLOW_SECONDS = 600


def callback_uri(ctx: PanelContext) -> str:
    return str(ctx.request.base_url).rstrip("/") + f"{PREFIX}/oidc/callback"


def _refused(ctx: PanelContext, failed: OidcFailed | None = None) -> Response:
    refused = None
    if failed is not None and failed.refused_field is not None:
        refused = {"field": failed.refused_field, "url": failed.refused_url}
    response = page(ctx, "oidc_refused.html", status_code=401, refused=refused)
    response.delete_cookie(FLOW_COOKIE, path=PREFIX + "/oidc")
    return response


@router.get("/oidc/start/{org_id}")
def start(request: Request, org_id: str) -> Response:
    ctx = context_of(request)
    parsed = parse_id(org_id)
    provider = None if parsed is None else ctx.services.oidc.get(parsed)
    if provider is None:
        return _refused(ctx)
    try:
        url, flow = ctx.services.oidc.begin(provider, callback_uri(ctx))
    except OidcFailed as exc:
        log.warning("oidc sign-in for org %s: %s", provider.org_id, exc.reason)
        return _refused(ctx, exc)
    response = redirect(url)
    response.set_cookie(
        FLOW_COOKIE,
        ".".join([str(flow.org_id), flow.state, flow.nonce, flow.code_verifier]),
        max_age=FLOW_SECONDS,
        path=PREFIX + "/oidc",
        httponly=True,
        secure=ctx.secure,
        samesite="lax",
    )
    return response


def _flow_of(cookie: str | None) -> FlowState | None:
    parts = (cookie or "").split(".")
    org = parse_id(parts[0]) if len(parts) == 4 else None
    if org is None:
        return None
    return FlowState(org_id=org, state=parts[1], nonce=parts[2], code_verifier=parts[3])


@router.get("/oidc/callback")
def callback(request: Request, state: str = "", code: str = "") -> Response:
    ctx = context_of(request)
    flow = _flow_of(request.cookies.get(FLOW_COOKIE))
    provider = None if flow is None else ctx.services.oidc.get(flow.org_id)
    if flow is None or provider is None or not state or not code:
        return _refused(ctx)
    try:
        who = ctx.services.oidc.finish(
            provider,
            flow,
            state=state,
            code=code,
            redirect_uri=callback_uri(ctx),
            now=ctx.session_now,
        )
    except OidcFailed as exc:
        log.warning("oidc sign-in for org %s: %s", provider.org_id, exc.reason)
        return _refused(ctx, exc)
    person = ctx.services.people.person_by_claims(
        provider.org_id, subject=who.subject, email=who.email
    )
    if person is None:
        log.warning("oidc sign-in for org %s: no invited person matches", provider.org_id)
        return _refused(ctx)
    opened = ctx.services.people.open_verified(person.id, now=ctx.session_now)
    response = page(ctx, "oidc_signed_in.html")
    ctx.set_session_cookie(response, opened.secret)
    response.delete_cookie(FLOW_COOKIE, path=PREFIX + "/oidc")
    return response


def provider_of(ctx: PanelContext, org_id: UUID) -> dict[str, str] | None:
    """What the people page shows of the provider: never its secret."""
    provider = ctx.services.oidc.get(org_id)
    if provider is None:
        return None
    base = str(ctx.request.base_url).rstrip("/")
    return {
        "issuer": provider.issuer,
        "client_id": provider.client_id,
        "start": f"{base}{PREFIX}/oidc/start/{org_id}",
    }
