"""In Chromium, talking straight to a replica (no nginx in front): a sign-in form with a pasted
300 kB password gets the panel's page that says the form was too large, in the reader's language,
never the browser's "connection reset"."""

from __future__ import annotations

from typing import Any

import pytest

from tests.panel.conftest import PanelWorld

pytestmark = pytest.mark.slow


def test_chromium_sees_the_too_large_page(panel_world: PanelWorld, browser: Any) -> None:
    # A context of its own, without the request interception of `new_page`: the browser's own
    # network stack must send the body and read the answer, as it does for a reader.
    context = browser.new_context(locale="de-DE")
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        page.goto(panel_world.url + "sign-in")
        page.locator("#email").fill("anna@example.com")
        page.locator("#password").evaluate("(field) => { field.value = 'x'.repeat(300000); }")
        with page.expect_navigation():
            page.locator("#password").evaluate("(field) => field.form.submit()")
        assert page.locator("html").get_attribute("lang") == "de"
        assert "65.536" in page.locator("#form-too-large").inner_text()
    finally:
        context.close()
