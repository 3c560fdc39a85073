"""The enrollment tokens' screen in a real browser (English and Dutch), checked with axe-core:
a token made with the form shows its install line once, a bound refused is marked on its field,
and a token is revoked with its button."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility, doc_screenshot

# A real browser through a few screens: started first (tests/conftest.py).
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("code", ["en", "nl"])
def test_a_token_is_made_shown_once_and_revoked(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    page = new_page({"en": "en-GB", "nl": "nl-NL"}[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("link", name=lang.gettext("Enrollment tokens")).click()
    page.get_by_role("heading", name=lang.gettext("Enrollment tokens"), level=1).wait_for()
    check_accessibility(page)

    uses = page.get_by_label(
        lang.gettext("How many hosts may use it (1 to %(max)s)", max=lang.number(10_000))
    )
    uses.fill("0")
    page.get_by_role("button", name=lang.gettext("Make the token")).click()
    assert page.locator("#uses").get_attribute("aria-invalid") == "true"
    check_accessibility(page)

    page.locator("#uses").fill("3")
    page.get_by_label(lang.gettext("What it is for (optional)")).fill("web servers")
    page.get_by_role("button", name=lang.gettext("Make the token")).click()
    line = page.locator("#install-line").inner_text()
    assert line.startswith(f"nachtwacht agent install --url {panel_world.server.base_url} ")
    assert "--enrollment-token nwe_" in line
    assert line.endswith(" --trusted-key release.pub")
    sentence = lang.gettext(
        "The file %(file)s comes from your provider, separately and never through this panel: put"
        " it on the host first, in the folder you run the line from.",
        file="release.pub",
    )
    assert page.locator("#trust-file").inner_text() == sentence
    check_accessibility(page)
    doc_screenshot(page, f"enrollment-{code}")

    page.get_by_role("button", name=lang.gettext("Revoke this token")).click()
    page.get_by_text(lang.gettext("The token is revoked: no host can use it any more.")).wait_for()
    assert page.locator("#install-line").count() == 0
    assert lang.gettext("revoked") in page.locator("table").inner_text()
    check_accessibility(page)
