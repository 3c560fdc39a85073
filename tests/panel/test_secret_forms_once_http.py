"""The forms that show a secret once, sent again as a browser's reload sends them ("resend"):
nothing new is made, the page says the secret was shown already, and the first secret stays
valid; the page that shows a secret is never kept by a cache. A one-use token that is not one is
ignored, never an error."""

from __future__ import annotations

import contextlib
import html
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import psycopg
import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.people_support import invite, set_password
from tests.worlds.rows import rows_at

_ONCE = re.compile(r'name="once" value="([^"]+)"')
# The tables any of the forms writes: equal before and after a resend means nothing was made.
TABLES = ("credentials", "enrollment_tokens", "webhooks", "people", "events", "panel_sessions")


def once_of(html: str) -> str:
    found = _ONCE.search(html)
    assert found is not None, "the form carries no one-use token"
    return found.group(1)


def rows(world: PanelWorld) -> dict[str, list[str]]:
    return rows_at(world.server.database_url, TABLES)


@dataclass(frozen=True)
class SecretForm:
    """A form that shows a secret once: who signs in, its page, where it posts, its fields, and
    how the secret it shows is found in the answer."""

    who: str  # "operator" or "customer"
    page: str
    action: str
    fields: dict[str, str]
    secret: re.Pattern[str]


def _person_id(world: PanelWorld, email: str) -> str:
    with psycopg.connect(world.server.database_url) as conn:
        found = conn.execute("SELECT id FROM people WHERE email = %s", [email]).fetchone()
    assert found is not None
    return str(found[0])


_KEY = re.compile(r'id="new-secret">.*?<code>([^<]+)</code>', re.S)
_LINK = re.compile(r'id="invitation-link"><code>([^<]+)</code>')

FORMS: dict[str, Callable[[PanelWorld, httpx.Client], SecretForm]] = {
    "issue_key": lambda world, client: SecretForm(
        "operator",
        "/panel/operator/credentials",
        "/panel/operator/credentials",
        {"audience": "operator", "name": "night shift"},
        _KEY,
    ),
    "rotate_key": lambda world, client: SecretForm(
        "operator",
        "/panel/operator/credentials",
        f"/panel/operator/credentials/{_credential_of(world, 'rotated')}/rotate",
        {},
        _KEY,
    ),
    "enrollment_token": lambda world, client: SecretForm(
        "customer",
        "/panel/enrollment",
        "/panel/enrollment",
        {"uses": "3", "hours": "24", "name_pattern": "", "label": "rack 4"},
        re.compile(r'id="install-line"><code>([^<]+)</code>'),
    ),
    "webhook_secret": lambda world, client: SecretForm(
        "customer",
        "/panel/webhook",
        "/panel/webhook",
        {"url": "https://hooks.example.com/nachtwacht", "secret": "", "action": "save"},
        re.compile(r"shown only now[^<]*</p>\s*<p><code>([^<]+)</code>"),
    ),
    "invitation": lambda world, client: SecretForm(
        "customer",
        "/panel/people",
        "/panel/people",
        {"name": "Ana", "email": "ana@acme.example", "role": "viewer"},
        _LINK,
    ),
    "new_invitation": lambda world, client: SecretForm(
        "customer",
        "/panel/people",
        f"/panel/people/{_invited(world, client, 'bo@acme.example')}/invitation",
        {},
        _LINK,
    ),
    "password_reset": lambda world, client: SecretForm(
        "customer",
        "/panel/people",
        f"/panel/people/{_invited(world, client, 'cy@acme.example', accept=True)}/reset",
        {},
        _LINK,
    ),
    "operator_invitation": lambda world, client: SecretForm(
        "operator",
        "/panel/operator/people",
        "/panel/operator/people",
        {"name": "Dee", "email": "dee@ops.example"},
        _LINK,
    ),
}


def _credential_of(world: PanelWorld, name: str) -> str:
    world.server.create_operator_key()  # a key to rotate, named below
    with psycopg.connect(world.server.database_url) as conn:
        conn.execute(
            "UPDATE credentials SET name = %s WHERE id = (SELECT id FROM credentials"
            " WHERE audience = 'operator' ORDER BY created_at DESC LIMIT 1)",
            [name],
        )
        found = conn.execute("SELECT id FROM credentials WHERE name = %s", [name]).fetchone()
    assert found is not None
    return str(found[0])


def _invited(world: PanelWorld, client: httpx.Client, email: str, *, accept: bool = False) -> str:
    link = invite(client, "Someone", email, "viewer")
    if accept:
        with world.client() as other:
            assert set_password(other, link).status_code == 303
    return _person_id(world, email)


@contextlib.contextmanager
def signed_in(world: PanelWorld, who: str, **kwargs: object) -> Iterator[httpx.Client]:
    key = world.server.create_operator_key() if who == "operator" else world.panel_key
    with sign_in_client(world, key, **kwargs) as client:  # type: ignore[arg-type]
        yield client


@pytest.mark.parametrize("name", sorted(FORMS))
def test_a_resent_secret_form_makes_nothing_and_the_first_secret_stays(
    panel_world: PanelWorld, name: str
) -> None:
    world = panel_world
    who = "operator" if name in {"issue_key", "rotate_key", "operator_invitation"} else "customer"
    with signed_in(world, who) as client:
        form = FORMS[name](world, client)
        assert form.who == who
        shown_page = client.get(form.page)
        data = {"csrf": csrf_of(shown_page.text), "once": once_of(shown_page.text), **form.fields}
        first = client.post(form.action, data=data)
        assert first.status_code == 200, first.text
        secret = form.secret.search(first.text)
        assert secret is not None, first.text
        # The page with the secret is kept by no cache, the browser's included.
        assert first.headers["cache-control"] == "no-store"
        before = rows(world)

        again = client.post(form.action, data=data)  # the browser's "resend"

        assert again.status_code == 409
        assert 'id="sent-again"' in again.text
        assert "nothing new was made now" in again.text
        assert secret.group(1) not in again.text
        assert form.secret.search(again.text) is None
        assert again.headers["cache-control"] == "no-store"
        assert rows(world) == before
        # The page answering the resend carries a fresh token: the form works again from it.
        assert once_of(again.text) != data["once"]
    _first_secret_still_works(world, name, secret.group(1))


def _first_secret_still_works(world: PanelWorld, name: str, secret: str) -> None:
    with world.client() as fresh:
        if name in {"issue_key", "rotate_key"}:
            form = fresh.get("/panel/sign-in")
            signed = fresh.post("/panel/sign-in", data={"key": secret, "csrf": csrf_of(form.text)})
            assert signed.status_code == 303, signed.text
        elif name == "webhook_secret":
            with psycopg.connect(world.server.database_url) as conn:
                stored = conn.execute("SELECT secret FROM webhooks").fetchone()
            assert stored == (secret,)
        elif name == "enrollment_token":
            token = secret.split("--enrollment-token ", 1)[1].split()[0]
            with psycopg.connect(world.server.database_url) as conn:
                live = conn.execute(
                    "SELECT count(*) FROM enrollment_tokens WHERE revoked_at IS NULL"
                ).fetchone()
            assert live == (1,) and token.startswith("nwe_")
        else:
            assert fresh.get(secret.replace(world.server.base_url, "")).status_code == 200


def test_a_new_form_after_the_secret_was_shown_makes_a_new_one(panel_world: PanelWorld) -> None:
    """The token is the form's, not the page's address: the same form opened again makes."""
    with signed_in(panel_world, "customer") as client:
        for label in ("rack 4", "rack 5"):
            shown = client.get("/panel/enrollment")
            made = client.post(
                "/panel/enrollment",
                data={
                    "csrf": csrf_of(shown.text),
                    "once": once_of(shown.text),
                    "uses": "1",
                    "hours": "1",
                    "label": label,
                },
            )
            assert made.status_code == 200 and 'id="install-line"' in made.text
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM enrollment_tokens").fetchone() == (2,)


@pytest.mark.parametrize(
    "once",
    [
        pytest.param("", id="none"),
        pytest.param("x", id="short"),
        pytest.param("a" * 199, id="long"),
        pytest.param("../../etc/passwd", id="path"),
        pytest.param("\u202etoken-token-token-token", id="bidi"),
        pytest.param("abc.def.ghi.jkl.mno.pqr.stu", id="dots"),
    ],
)
def test_a_token_that_is_not_one_is_ignored(panel_world: PanelWorld, once: str) -> None:
    """A form without a token (a page an older release rendered) or with one the panel never
    made is made as it always was; it is never taken as sent, and never an error."""
    with signed_in(panel_world, "customer") as client:
        for _ in range(2):
            shown = client.get("/panel/enrollment")
            made = client.post(
                "/panel/enrollment",
                data={"csrf": csrf_of(shown.text), "once": once, "uses": "1", "hours": "1"},
            )
            assert made.status_code == 200, made.text
            assert 'id="install-line"' in made.text
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM enrollment_tokens").fetchone() == (2,)


def test_a_refused_form_leaves_its_token_untaken(panel_world: PanelWorld) -> None:
    """A form refused while its secret was being made takes nothing: sent again as it was, it
    is refused again (not "sent already"), and corrected with the same token it makes."""
    with signed_in(panel_world, "customer") as client:
        shown = client.get("/panel/enrollment")
        data = {"csrf": csrf_of(shown.text), "once": once_of(shown.text), "uses": "1", "hours": "1"}
        before = rows(panel_world)
        for _ in range(2):
            refused = client.post("/panel/enrollment", data={**data, "label": "rack\x1b4"})
            assert refused.status_code == 422, refused.text
            assert 'id="sent-again"' not in refused.text
        assert rows(panel_world) == before
        made = client.post("/panel/enrollment", data={**data, "label": "rack 4"})
        assert made.status_code == 200 and 'id="install-line"' in made.text
        assert client.post("/panel/enrollment", data=data).status_code == 409
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM enrollment_tokens").fetchone() == (1,)
        assert conn.execute("SELECT token FROM panel_sent_forms").fetchall() == [(data["once"],)]


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_resent_form_is_said_in_each_language(panel_world: PanelWorld, code: str) -> None:
    lang = Language(code)
    with signed_in(panel_world, "customer", headers={"Accept-Language": code}) as client:
        shown = client.get("/panel/enrollment")
        data = {"csrf": csrf_of(shown.text), "once": once_of(shown.text), "uses": "1", "hours": "1"}
        assert client.post("/panel/enrollment", data=data).status_code == 200
        again = client.post("/panel/enrollment", data=data)
    said = lang.gettext(
        "This form was sent already (a reload sends a form again), so nothing new was made now."
        " What it made was shown once, on the page that answered it, and stays valid; if it was"
        " not kept, make a new one."
    )
    assert again.status_code == 409
    assert again.headers["content-language"] == code
    assert said in again.text.replace("&#39;", "'").replace("&quot;", '"')


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_key_name_with_a_control_is_said_as_such(panel_world: PanelWorld, code: str) -> None:
    """A key's name holding a control character or a bidirectional control is refused at the
    field naming the value and the character, not as a name that was not given; no key is made."""
    lang = Language(code)
    with signed_in(panel_world, "operator", headers={"Accept-Language": code}) as client:
        shown_page = client.get("/panel/operator/credentials")
        before = rows(panel_world)
        for name, control in (("\u202eops", "U+202E"), ("night\x1bshift", "U+001B")):
            answer = client.post(
                "/panel/operator/credentials",
                data={
                    "csrf": csrf_of(shown_page.text),
                    "once": once_of(shown_page.text),
                    "audience": "operator",
                    "name": name,
                },
            )
            assert answer.status_code == 422
            said = re.findall(r'id="name-error">([^<]*)<', answer.text)
            expected = lang.gettext(
                "%(field)s: “%(value)s” contains a control character (%(code)s). Write it in"
                " plain text.",
                field=lang.gettext("Name"),
                value=name.replace("\u202e", "\ufffd").replace("\x1b", "\ufffd"),
                code=control,
            )
            assert [html.unescape(text) for text in said] == [expected]
        assert rows(panel_world) == before
