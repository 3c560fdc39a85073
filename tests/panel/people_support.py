"""Helpers of the named people's tests: invite over HTTP, use the link, sign in with TOTP."""

from __future__ import annotations

import re
import time

import httpx

from control_plane.accounts.passwords import TOTP_STEP_SECONDS, totp_code
from tests.panel.conftest import csrf_of
from tests.panel.oidc_provider import CLIENT_SECRET

PASSWORD = "correct horse battery staple"
_SECRET = re.compile(r'id="totp-secret">([A-Z2-7=]+)<')
_LINK = re.compile(r'id="invitation-link"><code>([^<]+)</code>')


def invite(client: httpx.Client, name: str, email: str, role: str) -> str:
    """The invitation link, as the editor signed in on `client` sees it once."""
    form = client.get("/panel/people")
    answer = client.post(
        "/panel/people",
        data={"csrf": csrf_of(form.text), "name": name, "email": email, "role": role},
    )
    assert answer.status_code == 200, answer.text
    found = _LINK.search(answer.text)
    assert found is not None, answer.text
    return found.group(1)


def save_oidc(client: httpx.Client, issuer: str, client_id: str) -> httpx.Response:
    """The organisation's provider saved by the editor signed in on `client` (the test secret)."""
    page = client.get("/panel/people")
    return client.post(
        "/panel/people/oidc",
        data={
            "csrf": csrf_of(page.text),
            "issuer": issuer,
            "client_id": client_id,
            "client_secret": CLIENT_SECRET,
        },
    )


def set_password(client: httpx.Client, link: str, password: str = PASSWORD) -> httpx.Response:
    form = client.get(link)
    assert form.status_code == 200, form.text
    return client.post(
        link, data={"csrf": csrf_of(form.text), "password": password, "repeated": password}
    )


def first_step(client: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    form = client.get("/panel/sign-in")
    return client.post(
        "/panel/sign-in/person",
        data={"csrf": csrf_of(form.text), "email": email, "password": password},
    )


def totp_secret_of(html: str) -> str:
    found = _SECRET.search(html)
    assert found is not None, html
    return found.group(1)


def current_code(secret: str) -> str:
    return totp_code(secret, int(time.time()) // TOTP_STEP_SECONDS)


def give_code(client: httpx.Client, page: httpx.Response, code: str) -> httpx.Response:
    return client.post("/panel/sign-in/code", data={"csrf": csrf_of(page.text), "code": code})


def sign_in_person(client: httpx.Client, email: str, secret: str | None = None) -> str:
    """Signs `client` in as the person; their TOTP secret (set up now when `secret` is None).
    Waits for the next time step when it must: a code is accepted once."""
    step = first_step(client, email)
    assert step.status_code == 200, step.text
    if secret is None:
        secret = totp_secret_of(step.text)
    answer = give_code(client, step, current_code(secret))
    if answer.status_code == 401 and "used already" in answer.text:
        time.sleep(TOTP_STEP_SECONDS - time.time() % TOTP_STEP_SECONDS + 0.5)
        answer = give_code(client, answer, current_code(secret))
    assert answer.status_code == 303, answer.text
    return secret
