"""An organisation's own OpenID Connect provider: its settings, and the authorization code flow
with PKCE that lets an invited person sign in through it.

The flow, with Authlib's OAuth 2.0 parts (the authorization request, PKCE's S256 challenge, the
token request) and joserfc (Authlib's JOSE library) for the ID token:

    begin   discovery (`/.well-known/openid-configuration`, its issuer must be the configured
            one); a fresh state, nonce and code verifier; the provider's authorize URL
    finish  the state returned must be the one sent (constant-time); the code is exchanged with
            the verifier and the client's secret; the ID token is verified against the
            provider's JWKS: signature, issuer, audience, expiry, and the nonce sent

Every request to the provider goes out under the control plane's outbound address policy
(`notifications.addresses`, the same as webhooks'): the issuer when it is saved, and at every
sign-in the issuer and the two endpoints its discovery document names (`token_endpoint`,
`jwks_uri`), each resolved once and connected to at the checked address; redirects are not
followed. So an editor's issuer cannot make the control plane a probe of its own network.

Only a verified ID token names anyone: its subject, and its e-mail address only when the provider
says it is verified. The client secret is stored as a webhook's secret is (it must be sent to the
provider) and is never shown again, logged or put on the trail.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from uuid import UUID

import httpx
from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from control_plane.errors import InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import plain_address, plain_name, stored_text
from control_plane.notifications.addresses import (
    ADDRESS_REFUSED,
    Resolver,
    WebhookAddressPolicy,
    WebhookAddressRefused,
    pinned_send,
    resolve_host,
)
from control_plane.types import Pool

__all__ = [
    "ADDRESS_REFUSED",
    "FlowState",
    "OidcFailed",
    "OidcProvider",
    "OidcService",
    "VerifiedIdentity",
    "begin",
]

MAX_TEXT = 500
# The provider is asked over the network during a sign-in: a slow one fails the sign-in, it
# does not hold a request open.
TIMEOUT = httpx.Timeout(10.0)
# Clocks differ a little between the provider and us.
LEEWAY_SECONDS = 60
ALGORITHMS = ["RS256", "ES256", "PS256", "EdDSA"]


class OidcFailed(Exception):
    """The provider's answer did not prove who the person is: `reason` says which check failed
    (for the server's log and the tests; the person sees one page). `refused_field` and
    `refused_url` name a provider address the control plane would not connect to, which the
    page shows, since only an editor or the operator can mend it."""

    def __init__(
        self, reason: str, *, refused_field: str | None = None, refused_url: str | None = None
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.refused_field = refused_field
        self.refused_url = refused_url


@dataclass(frozen=True, kw_only=True)
class OidcProvider:
    org_id: UUID
    issuer: str
    client_id: str
    client_secret: str
    updated_at: datetime

    def __repr__(self) -> str:
        return f"OidcProvider(org_id={self.org_id}, issuer={self.issuer!r}, client_id=…)"


@dataclass(frozen=True, kw_only=True)
class FlowState:
    """What the browser carries between the redirect to the provider and the way back."""

    org_id: UUID
    state: str
    nonce: str
    code_verifier: str


@dataclass(frozen=True, kw_only=True)
class VerifiedIdentity:
    subject: str
    email: str | None  # only an address the provider says is verified


def checked_issuer(issuer: object, addresses: WebhookAddressPolicy) -> str:
    """An https URL; plain http only to this host's loopback (a provider on the same machine),
    and either only to an address `addresses` allows. Kept exactly as given (a trailing slash
    too): the provider's discovery document and its ID tokens name their issuer, and OpenID
    Connect compares the two strings as they are."""
    if not isinstance(issuer, str) or not issuer.strip():
        raise InvalidInput("issuer", issuer, "must be the provider's issuer URL (https://…)")
    clean = issuer.strip()
    stored_text("issuer", clean, MAX_TEXT)
    checked_endpoint("issuer", clean, addresses)
    return plain_address("issuer", clean, MAX_TEXT)


def checked_endpoint(field: str, url: str, addresses: WebhookAddressPolicy) -> None:
    """`url` (the issuer, or an endpoint a discovery document names) has the issuer's shape and
    an address the policy allows (when its host is an address literal or `localhost`; a name is
    resolved and checked when the request is sent). InvalidInput names the field otherwise."""
    parts = urlsplit(url)
    secure = parts.scheme == "https" and parts.hostname
    local_plain = parts.scheme == "http" and parts.hostname and _loopback(parts.hostname)
    if not (secure or local_plain):
        raise InvalidInput(field, url, "must be the provider's issuer URL (https://…)")
    try:
        addresses.check_url(url)
    except WebhookAddressRefused as exc:
        raise InvalidInput(
            field,
            url,
            f"must be an address the control plane may connect to: {exc}",
            code=ADDRESS_REFUSED,
        ) from exc


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OidcService:
    """The providers' settings, and the sign-in flow's two requests under `addresses` (the
    policy object every outbound request of this process follows)."""

    def __init__(
        self,
        pool: Pool,
        addresses: WebhookAddressPolicy | None = None,
        *,
        resolve: Resolver = resolve_host,
    ) -> None:
        self._pool = pool
        self._addresses = addresses or WebhookAddressPolicy()
        self._resolve = resolve

    def begin(self, provider: OidcProvider, redirect_uri: str) -> tuple[str, FlowState]:
        return begin(provider, redirect_uri, addresses=self._addresses, resolve=self._resolve)

    def finish(
        self,
        provider: OidcProvider,
        flow: FlowState,
        *,
        state: str,
        code: str,
        redirect_uri: str,
        now: datetime,
    ) -> VerifiedIdentity:
        """The person the provider vouches for, or `OidcFailed`."""
        if not hmac.compare_digest(flow.state.encode(), state.encode()):
            raise OidcFailed("state: not the one sent")
        with _client() as client:
            outbound = _Outbound(client=client, addresses=self._addresses, resolve=self._resolve)
            found = _discovery(outbound, provider.issuer)
            # Both endpoints checked before either is asked: if one is refused, the code and the
            # client's secret go nowhere.
            for field in ("token_endpoint", "jwks_uri"):
                outbound.check(field, found[field])
            answer = outbound.send(
                "token_endpoint",
                "POST",
                found["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": redirect_uri,
                    "code_verifier": flow.code_verifier,
                },
                auth=(provider.client_id, provider.client_secret),
            )
            jwks = outbound.send("jwks_uri", "GET", found["jwks_uri"])
        try:
            answer.raise_for_status()
            tokens = answer.json()
            jwks.raise_for_status()
            keys = KeySet.import_key_set(jwks.json())
        except (httpx.HTTPError, ValueError, JoseError) as exc:
            raise OidcFailed(f"token: {type(exc).__name__}") from exc
        id_token = tokens.get("id_token") if isinstance(tokens, dict) else None
        if not isinstance(id_token, str):
            raise OidcFailed("token: no id_token")
        try:
            token = jwt.decode(id_token, keys, algorithms=ALGORITHMS)
            jwt.JWTClaimsRegistry(
                now=int(now.timestamp()),
                leeway=LEEWAY_SECONDS,
                iss={"essential": True, "value": provider.issuer},
                aud={"essential": True, "value": provider.client_id},
                sub={"essential": True},
                exp={"essential": True},
                nonce={"essential": True, "value": flow.nonce},
            ).validate(token.claims)
        except (JoseError, ValueError) as exc:
            raise OidcFailed(f"id_token: {type(exc).__name__}") from exc
        claims = token.claims
        email = claims.get("email") if claims.get("email_verified") is True else None
        return VerifiedIdentity(
            subject=str(claims["sub"]), email=email if isinstance(email, str) else None
        )

    def get(self, org_id: UUID) -> OidcProvider | None:
        with self._pool.connection() as conn:
            row = conn.execute(
                "SELECT org_id, issuer, client_id, client_secret, updated_at"
                " FROM oidc_providers WHERE org_id = %s",
                [org_id],
            ).fetchone()
        return None if row is None else OidcProvider(**row)

    def put(
        self,
        org_id: UUID,
        *,
        issuer: object,
        client_id: object,
        client_secret: object,
        now: datetime,
        actor: Actor,
    ) -> OidcProvider:
        clean_issuer = checked_issuer(issuer, self._addresses)
        for field, value in (("client_id", client_id), ("client_secret", client_secret)):
            if not isinstance(value, str) or not value.strip():
                shown = "(hidden)" if field == "client_secret" else value
                raise InvalidInput(field, shown, "must be given (from the provider's client)")
        assert isinstance(client_id, str) and isinstance(client_secret, str)
        # Typed by an editor, shown on the people page and the trail: plain text, as a name is.
        client_id = plain_name("client_id", client_id, MAX_TEXT)
        if len(client_secret) > MAX_TEXT or "\x00" in client_secret:
            raise InvalidInput("client_secret", "(hidden)", f"must be text of {MAX_TEXT} or less")
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO oidc_providers (org_id, issuer, client_id, client_secret, updated_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (org_id) DO UPDATE SET"
                " issuer = EXCLUDED.issuer, client_id = EXCLUDED.client_id,"
                " client_secret = EXCLUDED.client_secret, updated_at = EXCLUDED.updated_at",
                [org_id, clean_issuer, client_id.strip(), client_secret.strip(), now],
            )
            record_action(
                conn,
                kind="oidc.configured",
                actor=actor,
                at=now,
                org_id=org_id,
                data={"issuer": clean_issuer, "client_id": client_id.strip()},
            )
        return OidcProvider(
            org_id=org_id,
            issuer=clean_issuer,
            client_id=client_id.strip(),
            client_secret=client_secret.strip(),
            updated_at=now,
        )

    def remove(self, org_id: UUID, *, now: datetime, actor: Actor) -> bool:
        """Sign-in through the provider ends: the settings are gone, and so are the sessions of
        everyone who has signed in through it (a session does not say how it was opened, so a
        person who also has a password signs in again with it). The subjects it vouched for are
        forgotten: a provider set up later matches people by their verified address anew. False
        when there was none."""
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "DELETE FROM oidc_providers WHERE org_id = %s RETURNING issuer", [org_id]
            ).fetchone()
            if row is None:
                return False
            ended = conn.execute(
                "DELETE FROM person_sessions WHERE person_id IN (SELECT id FROM people"
                " WHERE org_id = %s AND oidc_subject IS NOT NULL)",
                [org_id],
            ).rowcount
            conn.execute(
                "UPDATE people SET oidc_subject = NULL WHERE org_id = %s"
                " AND oidc_subject IS NOT NULL",
                [org_id],
            )
            record_action(
                conn,
                kind="oidc.removed",
                actor=actor,
                at=now,
                org_id=org_id,
                data={"issuer": row["issuer"], "sessions_ended": ended},
            )
        return True


@dataclass(frozen=True, kw_only=True)
class _Outbound:
    """One sign-in step's requests to the provider: each URL checked, each connection pinned."""

    client: httpx.Client
    addresses: WebhookAddressPolicy
    resolve: Resolver

    def check(self, field: str, url: str) -> None:
        try:
            checked_endpoint(field, url, self.addresses)
        except InvalidInput as exc:
            raise OidcFailed(exc.message, refused_field=field, refused_url=url) from exc

    def send(
        self, field: str, method: str, url: str, *, named: str | None = None, **request: Any
    ) -> httpx.Response:
        """The answer, whatever its status; OidcFailed when the address is refused or nothing
        answers. A refusal names `named` (what the field holds) or else `url`."""
        self.check(field, named or url)
        try:
            return pinned_send(self.client, self.addresses, self.resolve, method, url, **request)
        except WebhookAddressRefused as exc:  # the name resolved to a refused address
            raise OidcFailed(
                f"{field}: {exc}", refused_field=field, refused_url=named or url
            ) from exc
        except (httpx.HTTPError, OSError) as exc:  # OSError: the name did not resolve
            raise OidcFailed(f"{field}: {type(exc).__name__}") from exc


def _client() -> httpx.Client:
    return httpx.Client(timeout=TIMEOUT, follow_redirects=False)


def _discovery(outbound: _Outbound, issuer: str) -> dict[str, Any]:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    answer = outbound.send("issuer", "GET", url, named=issuer)
    try:
        answer.raise_for_status()
        found = answer.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise OidcFailed(f"discovery: {type(exc).__name__}") from exc
    if not isinstance(found, dict) or found.get("issuer") != issuer:
        raise OidcFailed("discovery: the document's issuer is not the configured one")
    for field in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
        if not isinstance(found.get(field), str):
            raise OidcFailed(f"discovery: no {field}")
    return found


def begin(
    provider: OidcProvider,
    redirect_uri: str,
    *,
    addresses: WebhookAddressPolicy,
    resolve: Resolver = resolve_host,
) -> tuple[str, FlowState]:
    """Where to send the browser, and the flow's state for it to carry back. The browser, not
    the control plane, follows the authorization endpoint, so only the discovery is fetched."""
    with _client() as client:
        found = _discovery(
            _Outbound(client=client, addresses=addresses, resolve=resolve), provider.issuer
        )
    flow = FlowState(
        org_id=provider.org_id,
        state=generate_token(32),
        nonce=generate_token(32),
        code_verifier=generate_token(64),
    )
    url = prepare_grant_uri(
        found["authorization_endpoint"],
        client_id=provider.client_id,
        response_type="code",
        redirect_uri=redirect_uri,
        scope="openid email",
        state=flow.state,
        nonce=flow.nonce,
        code_challenge=create_s256_code_challenge(flow.code_verifier),
        code_challenge_method="S256",
    )
    return url, flow
