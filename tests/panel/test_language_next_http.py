"""The language link's `next=` is never an open redirect, and never leads outside the panel: a
scheme, another host (`//evil.example`, `/\\evil.example`, `https:evil.example`), a backslash,
dot segments that climb out of /panel/ (also percent-encoded, as browsers read them), control
characters and spaces all lead to the panel's start instead."""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

import pytest

from tests.panel.conftest import PanelWorld

OUTSIDE = [
    "//evil.example",
    "//evil.example/panel/",
    "/\\evil.example",
    "\\\\evil.example",
    "https:evil.example",
    "https:/evil.example",
    "https://evil.example/panel/",
    "HTTPS://evil.example/panel/",
    "javascript:alert(1)",
    "\t//evil.example",
    " //evil.example",
    "/\t/evil.example",
    "/panel/\\evil.example",
    "/panel@evil.example/",
    "/panel/../../v1/agents",
    "/panel/%2e%2e/%2E%2E/v1/agents",
    "/panel/..//evil.example",
    "/panel/.%2e/",
    "/panel/\r\nSet-Cookie: nw_panel_session=x",
    " /panel/agents",
    "/panel/agents\t",
    "/panel/\x7f",
]


@pytest.mark.parametrize("target", OUTSIDE)
def test_next_leads_to_the_start(panel_world: PanelWorld, target: str) -> None:
    with panel_world.client() as client:
        answer = client.get("/panel/language/de", params={"next": target})
    assert answer.status_code == 303
    assert answer.headers["location"] == "/panel/"
    assert "set-cookie" in answer.headers  # the language is still chosen
    assert "nw_panel_session" not in answer.headers["set-cookie"]


@pytest.mark.parametrize(
    "target", ["/panel/agents", "/panel/agents?q=web&sort=-seen&page=2", "/panel/history/runs"]
)
def test_a_page_of_the_panel_is_followed(panel_world: PanelWorld, target: str) -> None:
    with panel_world.client() as client:
        answer = client.get("/panel/language/de", params={"next": target})
    assert answer.headers["location"] == target
    landed = urlsplit(urljoin("https://cp.example/panel/language/de", target))
    assert landed.netloc == "cp.example" and landed.path.startswith("/panel/")
