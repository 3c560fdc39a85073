"""A customer's enrollment tokens in the panel, over HTTP against a real control plane: a token
made with the form is shown once with the host's install line, works at the exchange, is listed
without its secret and revoked with a button; bounds are refused next to their field."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx
import psycopg

from ground.contract import ENROLL_PATH
from tests.control_plane.root_chain import RootChain
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

FORM = {"uses": "1", "hours": "24", "name_pattern": "", "label": ""}
_FROM_THE_PROVIDER = (
    "The file {file} comes from your provider, separately and never through this panel: put it on"
    " the host first, in the folder you run the line from."
)


def _secret(page: str) -> str:
    found = re.search(r"--enrollment-token (nwe_[A-Za-z0-9_-]+)", page)
    assert found is not None, "no install line on the page"
    return found.group(1)


def _token_ids(world: PanelWorld) -> list[str]:
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute("SELECT id FROM enrollment_tokens ORDER BY created_at").fetchall()
    return [str(row[0]) for row in rows]


def test_a_token_is_made_shown_once_used_and_listed_without_its_secret(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/enrollment")
        assert page.status_code == 200
        assert "No tokens yet." in page.text
        made = client.post(
            "/panel/enrollment",
            data={
                **FORM,
                "label": "web servers",
                "name_pattern": "web-*",
                "csrf": csrf_of(page.text),
            },
        )
        assert made.status_code == 200, made.text
        secret = _secret(made.text)
        # No trust root is published: the line trusts the release key, a file from the provider.
        line = (
            f"nachtwacht agent install --url {panel_world.server.base_url} "
            f"--enrollment-token {secret} --trusted-key release.pub"
        )
        assert html.escape(line) in made.text
        assert html.escape(_FROM_THE_PROVIDER.format(file="release.pub")) in made.text
        with httpx.Client(base_url=panel_world.server.base_url, timeout=30) as host:
            enrolled = host.post(
                ENROLL_PATH,
                json={"name": "web-02"},
                headers={"Authorization": f"Bearer {secret}"},
            )
        assert enrolled.status_code == 201, enrolled.text
        assert enrolled.json()["org_id"] == panel_world.org_id
        again = client.get("/panel/enrollment").text
    assert secret not in again
    assert "web servers" in again
    assert "used up" in again
    assert "0 of 1" in again


def test_the_install_line_trusts_the_newest_published_trust_root(
    panel_world: PanelWorld, tmp_path: Path
) -> None:
    chain = RootChain()
    (tmp_path / "root-1.json").write_bytes(chain.v1)
    (tmp_path / "root-2.json").write_bytes(chain.next(chain.v1))
    panel_world.server.admin("trust-root", "publish", str(tmp_path / "root-1.json"))
    panel_world.server.admin("trust-root", "publish", str(tmp_path / "root-2.json"))
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/enrollment")
        made = client.post("/panel/enrollment", data={**FORM, "csrf": csrf_of(page.text)})
    assert made.status_code == 200, made.text
    line = (
        f"nachtwacht agent install --url {panel_world.server.base_url} "
        f"--enrollment-token {_secret(made.text)} --trust-root root-2.json"
    )
    assert html.escape(line) in made.text
    assert html.escape(_FROM_THE_PROVIDER.format(file="root-2.json")) in made.text


def test_a_token_is_revoked_with_its_button_and_refused_at_once(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/enrollment")
        token = csrf_of(page.text)
        secret = _secret(client.post("/panel/enrollment", data={**FORM, "csrf": token}).text)
        (token_id,) = _token_ids(panel_world)
        revoked = client.post(
            f"/panel/enrollment/{token_id}/revoke", data={"csrf": token}, follow_redirects=True
        )
        assert revoked.status_code == 200
        assert "The token is revoked: no host can use it any more." in revoked.text
        assert ">revoked<" in revoked.text
    with httpx.Client(base_url=panel_world.server.base_url, timeout=30) as host:
        refused = host.post(
            ENROLL_PATH, json={"name": "web-02"}, headers={"Authorization": f"Bearer {secret}"}
        )
    assert refused.status_code == 401


def test_another_organisations_token_cannot_be_revoked(panel_world: PanelWorld) -> None:
    other = panel_world.server.create_org("Globex")
    with sign_in_client(panel_world, other["panel_key"]) as theirs:
        form = csrf_of(theirs.get("/panel/enrollment").text)
        assert theirs.post("/panel/enrollment", data={**FORM, "csrf": form}).status_code == 200
    (token_id,) = _token_ids(panel_world)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/enrollment").text)
        answer = client.post(f"/panel/enrollment/{token_id}/revoke", data={"csrf": token})
        listed = client.get("/panel/enrollment").text
    assert answer.status_code == 404
    assert "No tokens yet." in listed
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT revoked_at FROM enrollment_tokens").fetchone() == (None,)


def test_a_term_out_of_bounds_is_refused_next_to_its_field(panel_world: PanelWorld) -> None:
    cases = [
        ({"uses": "0"}, "uses-error", "“0” is not accepted. Give a whole number from 1 to 10,000."),
        ({"uses": "10001"}, "uses-error", "Give a whole number from 1 to 10,000."),
        ({"uses": "two"}, "uses-error", "“two” is not accepted."),
        ({"hours": "0"}, "hours-error", "Give a whole number from 1 to 720."),
        ({"hours": "721"}, "hours-error", "“721” is not accepted."),
        ({"name_pattern": "web\t*"}, "name_pattern-error", "contains a control character"),
    ]
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/enrollment").text)
        for change, where, words in cases:
            answer = client.post("/panel/enrollment", data={**FORM, **change, "csrf": token})
            assert answer.status_code == 422, change
            assert f'id="{where}"' in answer.text, change
            assert words in answer.text, change
            assert "--enrollment-token" not in answer.text
    assert _token_ids(panel_world) == []


def test_the_page_speaks_the_readers_language(panel_world: PanelWorld) -> None:
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": "nl"}
    ) as client:
        page = client.get("/panel/enrollment").text
        made = client.post("/panel/enrollment", data={**FORM, "csrf": csrf_of(page)}).text
    assert "<h1>Inschrijftokens</h1>" in page
    assert "Het nieuwe token. Het wordt alleen nu getoond" in made
    assert "bruikbaar" in made
