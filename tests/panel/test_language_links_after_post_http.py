"""A page that answers a form's post (the form refused at a field, "The form was not sent", the
form too large) has language links that lead back to a page that exists — the form's own page —
never to the address that only takes the post. Its "back to the form" link does the same when
the browser's Referer is itself such an address."""

from __future__ import annotations

import re
from html import unescape
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def _language_targets(html: str) -> set[str]:
    links = re.findall(r'href="(/panel/language/[a-z]{2}\?next=[^"]*)"', html)
    assert len(links) == 9, html[:500]
    return {parse_qs(urlsplit(unescape(link)).query)["next"][0] for link in links}


def _opens(reader: httpx.Client, link_target: str) -> None:
    choice = reader.get(f"/panel/language/de?next={link_target}")
    assert choice.status_code == 303
    assert choice.headers["location"] == link_target
    assert reader.get(link_target).status_code == 200


def test_a_hold_refused_at_its_field_links_to_the_agents_page(panel_world: PanelWorld) -> None:
    agent = f"/panel/agents/{panel_world.agent_id}"
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        csrf = csrf_of(reader.get(agent).text)
        answer = reader.post(
            agent + "/hold", data={"csrf": csrf, "until": "not a day", "reason": "patching"}
        )
        assert answer.status_code == 422
        assert "not a day" in answer.text
        assert _language_targets(answer.text) == {agent}
        _opens(reader, agent)


def test_the_form_was_not_sent_links_to_the_forms_page(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        csrf = csrf_of(reader.get("/panel/agents").text)
        answer = reader.post(
            "/panel/agents/bulk",
            data={"csrf": csrf, "target": "x" * 30, "action": "hold"},
            # The browser's Referer: the page that answered an earlier post of the form.
            headers={"referer": f"{panel_world.server.base_url}/panel/agents/bulk"},
        )
        assert answer.status_code == 422
        assert "The form was not sent" in answer.text
        assert _language_targets(answer.text) == {"/panel/agents"}
        assert 'href="/panel/agents">' in answer.text  # back to the form
        _opens(reader, "/panel/agents")


def test_the_form_too_large_links_to_the_sign_in_page(panel_world: PanelWorld) -> None:
    with panel_world.client() as reader:
        csrf = csrf_of(reader.get("/panel/sign-in").text)
        answer = reader.post(
            "/panel/sign-in/person",
            data={"csrf": csrf, "email": "anna@example.com", "password": "x" * 100_000},
        )
        assert answer.status_code == 413
        assert _language_targets(answer.text) == {"/panel/sign-in"}
        _opens(reader, "/panel/sign-in")


def test_a_page_opened_by_get_keeps_its_own_address(panel_world: PanelWorld) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as reader:
        answer = reader.get("/panel/agents?q=web&sort=-seen")
    assert _language_targets(answer.text) == {"/panel/agents?q=web&sort=-seen"}
