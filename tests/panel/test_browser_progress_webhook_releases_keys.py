"""The progress, webhook, release and key screens in a real browser: in each of the nine languages
the update's progress, the webhook's test delivery, the operators' releases and credentials
(axe-core on each, no English sentence left on a page in another language); the progress followed by
its script without a reload; the withdraw and credential forms with the keyboard alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from babel.messages.pofile import read_po

from control_plane.accounts.services import FIRST_PANEL_KEY
from control_plane.panel.i18n import LANGUAGES, LOCALES_DIR, Language
from control_plane.panel.wording import key_name
from tests.panel.conftest import PanelWorld, check_accessibility, doc_screenshot
from tests.panel.operator_support import (
    agent_reports,
    publish_releases,
    set_webhook,
    webhook_receiver,
)
from tests.panel.test_browser_languages import BROWSER_LOCALES
from tests.panel.test_progress_webhook_releases_keys_http import SPRING

# A real browser through many screens, 6-13 s a test: started first (tests/conftest.py).
pytestmark = pytest.mark.slow


def _english_sentences() -> set[str]:
    with (LOCALES_DIR / "en" / "LC_MESSAGES" / "messages.po").open("rb") as po:
        catalog = read_po(po, locale="en")
    return {
        str(m.string)
        for m in catalog
        if m.id and not isinstance(m.id, tuple) and len(str(m.string)) > 25 and "%(" not in m.id
    }


def _no_english(page: Any, code: str, sentences: set[str]) -> None:
    if code == "en":
        return
    html = page.content()
    left = [sentence for sentence in sentences if sentence in html]
    assert left == [], f"{code}: English left on {page.url}: {left}"


def _doc_screenshot(page: Any, name: str, code: str) -> None:
    # docs/panel.md shows the screens in two languages.
    if code in {"en", "nl"}:
        doc_screenshot(page, f"{name}-{code}")


def _sign_in(page: Any, world: PanelWorld, lang: Language, key: str) -> None:
    page.goto(world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()


@pytest.mark.parametrize("code", LANGUAGES)
def test_progress_webhook_releases_and_keys_in_each_language(
    code: str, loopback_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    english = _english_sentences()
    publish_releases(loopback_world, ("1.5.0", 42), ("1.6.0", 43))
    agent_reports(loopback_world, "1.6.0")
    page = new_page(BROWSER_LOCALES[code])
    _sign_in(page, loopback_world, lang, loopback_world.panel_key)
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()

    page.get_by_role("link", name="web-01").click()
    page.get_by_role("button", name=lang.gettext("Update now")).click()
    page.get_by_role("heading", name=lang.gettext("Update of %(name)s", name="web-01")).wait_for()
    assert lang.gettext("The agent picks up the request at its next check-in.") in (
        page.locator("ol.progress").inner_text()
    )
    check_accessibility(page)
    _no_english(page, code, english)
    _doc_screenshot(page, "progress", code)

    with webhook_receiver(204, now=SPRING) as receiver:
        set_webhook(loopback_world, receiver.url)
        page.get_by_role("link", name=lang.gettext("Webhook")).click()
        page.get_by_role("button", name=lang.gettext("Send a test delivery")).click()
        expected = lang.gettext(
            "The test arrived: your address answered HTTP %(status)s.", status=204
        )
        assert expected in page.locator("#test-result").inner_text()
        assert receiver.received and receiver.received[0][1]
    check_accessibility(page)
    _no_english(page, code, english)
    _doc_screenshot(page, "webhook-test", code)

    page.get_by_role("button", name=lang.gettext("Sign out")).click()
    _sign_in(page, loopback_world, lang, loopback_world.server.create_operator_key())
    page.get_by_role("link", name=lang.gettext("Releases")).click()
    page.get_by_role("heading", name=lang.gettext("Releases"), exact=True).wait_for()
    page.get_by_role("button", name=lang.gettext("Withdraw %(version)s", version="1.6.0")).click()
    error = page.locator(".field-error")
    assert error.inner_text() == lang.gettext(
        "Give a reason of at most %(count)s characters.", count=lang.number(500)
    )
    page.get_by_label(lang.gettext("Why withdraw %(version)s? (required)", version="1.6.0")).fill(
        "breaks TLS"
    )
    page.get_by_role("button", name=lang.gettext("Withdraw %(version)s", version="1.6.0")).click()
    page.locator(".notice").wait_for()
    assert "web-01" in page.locator(".agents-on-release").inner_text()
    check_accessibility(page)
    _no_english(page, code, english)
    _doc_screenshot(page, "releases", code)

    page.get_by_role("link", name=lang.gettext("Credentials")).click()
    page.get_by_role(
        "button", name=lang.gettext("Rotate %(name)s", name=key_name(lang, FIRST_PANEL_KEY))
    ).click()
    assert page.locator("#new-secret code").inner_text().startswith("nwp_")
    check_accessibility(page)
    _no_english(page, code, english)
    _doc_screenshot(page, "credentials", code)
    page.get_by_role(
        "link", name=lang.gettext("Revoke %(name)s…", name=key_name(lang, FIRST_PANEL_KEY))
    ).click()
    check_accessibility(page)
    _no_english(page, code, english)
    page.get_by_role(
        "button", name=lang.gettext("Yes, revoke %(name)s", name=key_name(lang, FIRST_PANEL_KEY))
    ).click()
    page.get_by_role("status").filter(
        has_text=lang.gettext("The key is revoked: it is refused from now on.")
    ).wait_for()

    page.get_by_role("link", name=lang.gettext("Operations"), exact=True).click()
    assert page.locator('section[aria-labelledby="fleet-heading"] svg.chart').count() == 1
    check_accessibility(page)
    _no_english(page, code, english)


def test_the_progress_follows_the_update_without_a_reload(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    page = new_page("en-GB")
    _sign_in(page, panel_world, lang, panel_world.panel_key)
    page.get_by_role("link", name="web-01").click()
    page.get_by_role("button", name=lang.gettext("Update now")).click()
    page.locator("ol.progress").wait_for()
    page.evaluate("window.loadedOnce = true")
    run_id = page.url.rsplit("/", 1)[1]
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "UPDATE runs SET status = 'succeeded', version = '1.6.0', claimed_at = now(),"
            " finished_at = now() WHERE id = %s",
            [run_id],
        )
    outcome = page.locator("#progress-outcome")
    outcome.filter(has_text=lang.gettext("updated to %(version)s", version="1.6.0")).wait_for()
    assert page.evaluate("window.loadedOnce") is True, "the page was reloaded"
    assert outcome.get_attribute("class") == "notice"


def _tab_to(page: Any, element_id: str, limit: int = 80) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            return
    raise AssertionError(f"Tab never reached #{element_id}")


def _tab_to_text(page: Any, text: str, limit: int = 120) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.innerText") == text:
            return
    raise AssertionError(f"Tab never reached {text!r}")


def test_withdraw_issue_and_revoke_a_key_with_the_keyboard_alone(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    publish_releases(panel_world, ("1.5.0", 42))
    page = new_page("en-GB")
    page.goto(panel_world.url)
    _tab_to(page, "key")
    page.keyboard.type(panel_world.server.create_operator_key())
    page.keyboard.press("Enter")
    page.get_by_role("heading", name=lang.gettext("Operations")).wait_for()
    page.goto(panel_world.url + "operator/releases")
    field = page.get_by_label(lang.gettext("Why withdraw %(version)s? (required)", version="1.5.0"))
    _tab_to(page, str(field.get_attribute("id")))
    page.keyboard.type("bad build")
    page.keyboard.press("Enter")
    page.locator(".notice").wait_for()
    assert "bad build" in page.locator(".warning").inner_text()

    page.goto(panel_world.url + "operator/credentials")
    _tab_to(page, "name")
    page.keyboard.type("night shift")
    page.keyboard.press("Enter")
    assert page.locator("#new-secret code").inner_text().startswith("nwo_")
    _tab_to_text(page, lang.gettext("Revoke %(name)s…", name="night shift"))
    page.keyboard.press("Enter")
    page.get_by_role(
        "heading", name=lang.gettext("Revoke %(name)s?", name="night shift")
    ).wait_for()
    _tab_to_text(page, lang.gettext("Yes, revoke %(name)s", name="night shift"))
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(
        has_text=lang.gettext("The key is revoked: it is refused from now on.")
    ).wait_for()


def test_a_test_delivery_with_the_keyboard_alone(
    loopback_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    page = new_page("en-GB")
    page.goto(loopback_world.url)
    _tab_to(page, "key")
    page.keyboard.type(loopback_world.panel_key)
    page.keyboard.press("Enter")
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    with webhook_receiver(204, now=SPRING) as receiver:
        set_webhook(loopback_world, receiver.url)
        page.goto(loopback_world.url + "webhook")
        _tab_to_text(page, lang.gettext("Send a test delivery"))
        page.keyboard.press("Enter")
        page.locator("#test-result").wait_for()
        assert len(receiver.received) == 1
