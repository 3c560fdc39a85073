"""A panel form larger than the request limit (a pasted 100 kB password, say) gets a panel page in
the reader's language that says the form was too large and what the limit is, never the API's
JSON; nothing is changed. The API keeps its JSON 413."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import psycopg
import pytest

from control_plane.api.limits import MAX_BODY_BYTES
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

PASTED = "x" * 100_000


def _sign_in_form(client: httpx.Client) -> str:
    return csrf_of(client.get("/panel/sign-in").text)


def test_a_pasted_100_kb_password_gets_the_panels_page(panel_world: PanelWorld) -> None:
    with panel_world.client() as reader:
        csrf = _sign_in_form(reader)
        answer = reader.post(
            "/panel/sign-in/person",
            data={"csrf": csrf, "email": "anna@example.com", "password": PASTED},
            headers={"referer": f"{panel_world.server.base_url}/panel/sign-in"},
        )
    assert answer.status_code == 413
    assert answer.headers["content-type"].startswith("text/html")
    assert "request_too_large" not in answer.text
    assert "The form was too large" in answer.text
    assert "64 kB" in answer.text and "65,536 bytes" in answer.text
    assert 'href="/panel/sign-in"' in answer.text  # back to the form
    assert PASTED[:50] not in answer.text
    assert answer.headers["content-security-policy"].startswith("default-src 'self'")


def test_the_page_speaks_the_readers_language(panel_world: PanelWorld) -> None:
    with panel_world.client() as reader:
        csrf = _sign_in_form(reader)
        answer = reader.post(
            "/panel/sign-in/person",
            data={"csrf": csrf, "email": "anna@example.com", "password": PASTED},
            headers={"accept-language": "de-DE,de;q=0.9"},
        )
    assert answer.status_code == 413
    assert answer.headers["content-language"] == "de"
    assert '<html lang="de">' in answer.text
    assert "The form was too large" not in answer.text
    assert "64 kB" in answer.text and "65.536" in answer.text


def test_a_signed_in_form_too_large_changes_nothing(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        agent = f"/panel/agents/{panel_world.agent_id}"
        form = editor.get(agent)
        answer = editor.post(
            agent + "/hold",
            data={"csrf": csrf_of(form.text), "until": "2027-04-02", "reason": PASTED},
        )
        assert answer.status_code == 413
        assert "The form was too large" in answer.text
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM holds").fetchone() == (0,)


def _chunks() -> Iterator[bytes]:
    yield b"csrf=x&email=anna%40example.com&password="
    for _ in range(MAX_BODY_BYTES // 1000 + 2):
        yield b"y" * 1000


def test_a_form_sent_in_chunks_past_the_limit_gets_the_page_too(panel_world: PanelWorld) -> None:
    with panel_world.client() as reader:
        answer = reader.post(
            "/panel/sign-in/person",
            content=_chunks(),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
    assert answer.status_code == 413
    assert "The form was too large" in answer.text


@pytest.mark.parametrize("path", ["/v1/agents", "/v1/admin/settings"])
def test_the_api_keeps_its_json(panel_world: PanelWorld, path: str) -> None:
    with panel_world.client() as caller:
        answer = caller.post(path, content=b"{" + b" " * (MAX_BODY_BYTES + 1) + b"}")
    assert answer.status_code == 413
    assert answer.json()["detail"]["code"] == "request_too_large"
