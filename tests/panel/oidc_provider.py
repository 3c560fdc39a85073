"""A small OpenID Connect provider for the tests, served on loopback in a thread: discovery,
JWKS, authorize (which at once sends the browser back with a code, as if the person had signed
in there) and token (which checks the client's secret and the PKCE verifier, and signs a real
ID token with its RSA key). Knobs make it misbehave the ways a hostile or broken provider would."""

from __future__ import annotations

import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import uvicorn
from fastapi import FastAPI, Form, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

CLIENT_ID = "nachtwacht-panel"
CLIENT_SECRET = "s3cret-of-the-client"


def _new_key(kid: str) -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": kid}, private=True)


@dataclass
class Provider:
    url: str = ""
    subject: str = "anna-subject-1"
    email: str = "anna@example.com"
    email_verified: bool = True
    wrong_nonce: bool = False
    foreign_key: bool = False
    key: RSAKey = field(default_factory=lambda: _new_key("provider-key"))
    # Same key id, other key: a token it signs names the provider's key but is not its work.
    other_key: RSAKey = field(default_factory=lambda: _new_key("provider-key"))
    codes: dict[str, dict[str, str]] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    # Every path asked, to show a refused provider was never asked at all.
    requests: list[str] = field(default_factory=list)
    # What the discovery names instead of the provider's own endpoints (a hostile document).
    endpoints: dict[str, str] = field(default_factory=dict)
    # Where the discovery sends its asker instead of answering (a redirect to follow, or not).
    discovery_redirect: str | None = None

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": CLIENT_ID,
            "sub": self.subject,
            "email": self.email,
            "email_verified": self.email_verified,
            "nonce": "not-the-nonce" if self.wrong_nonce else nonce,
            "iat": now,
            "exp": now + 300,
        }
        key = self.other_key if self.foreign_key else self.key
        return jwt.encode({"alg": "RS256", "kid": str(key.kid)}, claims, key)


def _app(provider: Provider) -> FastAPI:
    app = FastAPI()

    @app.middleware("http")
    async def record(request: Request, call_next: Any) -> Response:
        provider.requests.append(request.url.path)
        if provider.discovery_redirect and request.url.path.endswith("openid-configuration"):
            return RedirectResponse(provider.discovery_redirect, status_code=302)
        answer: Response = await call_next(request)
        return answer

    @app.get("/.well-known/openid-configuration")
    def discovery() -> dict[str, Any]:
        return {
            "issuer": provider.url,
            "authorization_endpoint": provider.url + "/authorize",
            "token_endpoint": provider.url + "/token",
            "jwks_uri": provider.url + "/jwks",
            "response_types_supported": ["code"],
            "id_token_signing_alg_values_supported": ["RS256"],
        } | provider.endpoints

    @app.get("/jwks")
    def jwks() -> dict[str, Any]:
        return KeySet([provider.key]).as_dict(private=False)

    @app.get("/authorize")
    def authorize(request: Request) -> Response:
        query = request.query_params
        code = secrets.token_urlsafe(16)
        provider.codes[code] = dict(query)
        back = urlencode({"code": code, "state": query["state"]})
        return RedirectResponse(f"{query['redirect_uri']}?{back}", status_code=302)

    @app.post("/token")
    def token(
        request: Request,
        code: str = Form(""),
        code_verifier: str = Form(""),
        redirect_uri: str = Form(""),
    ) -> Response:
        provider.token_requests.append({"code": code, "code_verifier": code_verifier})
        sent = provider.codes.pop(code, None)
        expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if sent is None or request.headers.get("authorization") != expected:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(code_verifier.encode()).digest())
            .rstrip(b"=")
            .decode()
        )
        if sent.get("code_challenge_method") != "S256" or challenge != sent["code_challenge"]:
            return JSONResponse({"error": "invalid_grant", "why": "pkce"}, status_code=400)
        if redirect_uri != sent["redirect_uri"]:
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        return JSONResponse(
            {
                "access_token": secrets.token_urlsafe(16),
                "token_type": "Bearer",
                "id_token": provider.id_token(sent["nonce"]),
            }
        )

    return app


@contextmanager
def running_provider() -> Iterator[Provider]:
    provider = Provider()
    server = uvicorn.Server(
        uvicorn.Config(
            _app(provider), host="127.0.0.1", port=0, log_level="warning", lifespan="off"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the test provider did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    provider.url = f"http://127.0.0.1:{port}"
    try:
        yield provider
    finally:
        server.should_exit = True
        thread.join(timeout=10)
