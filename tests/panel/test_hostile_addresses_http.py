"""Every address under /panel/ answers a panel page (or a redirect) in the reader's language,
whatever it holds: a NUL in its path or query, control and bidirectional characters, a lone
surrogate or bytes that are not UTF-8 in its percent-encoding, a very long query, a parameter
given twice, a path nothing serves, a method the path does not take. Never the API's JSON, never
a 500, and nothing is changed."""

from __future__ import annotations

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, sign_in_client

HOSTILE_GETS = [
    "/panel/agents?q=%00",
    "/panel/agents?q=web%00&sort=name",
    "/panel/agents?%00=1",
    "/panel/agents/%00",
    "/panel/%00",
    "/panel/history/runs?from=%00",
    "/panel/sign-in?ended=%00",
    "/panel/static/%00",
    "/panel/agents?q=%01%1B%7F",
    "/panel/agents?q=%E2%80%AE%E2%81%A6",
    "/panel/agents?q=%ED%A0%80",
    "/panel/agents?q=%FF%FE",
    "/panel/agents/%FF",
    "/panel/agents/%ED%A0%80",
    "/panel/agents/%E2%80%AE",
    "/panel/agents?q=" + "a" * 6000,
    "/panel/agents?" + "&".join(["q=a"] * 400),
    "/panel/agents?state=failed&state=held&sort=name&sort=-seen&page=1&page=2",
    "/panel/history/runs?from=%FF&to=%ED%A0%80",
    "/panel/history/versions?nights=%FF",
    "/panel/forecast?date=%FF",
    "/panel/language/%FF?next=%ED%A0%80",
    "/panel/nothing-here",
    "/panel/agents/%2e%2e/%2e%2e/v1/agents",
    "/panel/static/%FF",
    "/panel/static/..%2f..%2fweb.py",
]


def _is_a_panel_answer(answer: httpx.Response) -> None:
    assert answer.status_code < 500, answer.text[:300]
    if answer.status_code in {302, 303, 307}:
        assert answer.headers["location"].startswith("/panel/")
        return
    assert answer.headers["content-type"].startswith("text/html"), answer.text[:300]
    assert "<!doctype html>" in answer.text
    assert '"detail"' not in answer.text
    assert answer.headers["content-security-policy"].startswith("default-src 'self'")


def _trail(world: PanelWorld) -> tuple[object, ...]:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM holds),"
            " (SELECT count(*) FROM agents)"
        ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.parametrize("path", HOSTILE_GETS)
def test_a_hostile_address_gets_a_panel_page(panel_world: PanelWorld, path: str) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        before = _trail(panel_world)
        _is_a_panel_answer(reader.get(path))
        with panel_world.client() as stranger:
            _is_a_panel_answer(stranger.get(path))
        assert _trail(panel_world) == before


def test_a_nul_in_the_query_is_said_in_the_readers_language(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        answer = reader.get("/panel/agents?q=web%00x", headers={"accept-language": "de"})
    assert answer.status_code == 400
    assert answer.headers["content-language"] == "de"
    assert '<html lang="de">' in answer.text
    assert "q: „web\ufffdx“" in answer.text  # the parameter, its value with the NUL shown
    assert "U+0000" in answer.text
    # The language links lead somewhere that can be opened, not back to the same address.
    assert "%2500" not in answer.text and "%00" not in answer.text


def test_a_nul_in_the_path_is_said_with_the_path(panel_world: PanelWorld) -> None:
    with panel_world.client() as reader:
        answer = reader.get("/panel/agents/ab%00cd")
    assert answer.status_code == 400
    assert "Address: “/panel/agents/ab\ufffdcd”" in answer.text
    assert "invalid_request" not in answer.text


def test_a_form_sent_to_an_address_with_a_nul_gets_the_page(panel_world: PanelWorld) -> None:
    agent = f"/panel/agents/{panel_world.agent_id}"
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        before = _trail(panel_world)
        answer = reader.post(
            agent + "/hold?x=%00", data={"csrf": "x", "until": "2027-04-02", "reason": "a" * 9000}
        )
        assert answer.status_code == 400
        assert "x: “\ufffd”" in answer.text
        assert answer.headers["connection"] == "close"
        assert _trail(panel_world) == before


def test_a_path_nothing_serves_is_not_found(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        answer = reader.get("/panel/nothing-here", headers={"accept-language": "nl"})
        assert answer.status_code == 404
        assert "Niet gevonden" in answer.text
        assert reader.get("/panel/agents").status_code == 200  # still signed in


def test_a_get_of_a_form_only_address_leads_to_the_forms_page(panel_world: PanelWorld) -> None:
    agent = f"/panel/agents/{panel_world.agent_id}"
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        answer = reader.get(agent + "/hold/end")
    assert answer.status_code == 303
    assert answer.headers["location"] == agent


def test_a_form_sent_to_a_page_without_one_is_a_panel_page(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        before = _trail(panel_world)
        answer = reader.post(f"/panel/agents/{panel_world.agent_id}", data={"csrf": "x"})
    assert answer.status_code == 405
    assert answer.headers["allow"] == "GET"
    _is_a_panel_answer(answer)
    assert _trail(panel_world) == before


def test_the_api_keeps_its_json(panel_world: PanelWorld) -> None:
    with panel_world.client() as caller:
        nul = caller.get("/v1/agents?q=%00")
        missing = caller.get("/v1/nothing-here")
    assert nul.status_code == 422 and nul.json()["detail"]["code"] == "invalid_request"
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
