"""The refusals a reader can meet in a real browser, in each of the nine languages, checked with
axe-core and read for their words: the agent list's and the history's addresses quoting what they
could not read (two values for one field among them), enrollment's refused bounds, a form that
gives a field twice, and a secret's form sent again (409)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.test_browser_languages import BROWSER_LOCALES

# A real browser through many screens: started first (tests/conftest.py).
pytestmark = pytest.mark.slow


def _text(page: Any) -> str:
    return str(page.locator("main").inner_text())


def _said(page: Any, sentence: str) -> None:
    assert html.unescape(sentence) in _text(page), (page.url, sentence, _text(page)[:600])


@pytest.mark.parametrize("code", LANGUAGES)
def test_each_refusal_in_each_language(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    base = panel_world.url.rstrip("/").removesuffix("/panel")

    # The agent list's view, each field refused with what was typed.
    page.goto(f"{base}/panel/agents?state=bogus&q=web&q=db")
    _said(
        page,
        lang.gettext(
            "%(field)s: “%(value)s” and “%(other)s”: two values for one field. Give one.",
            field=lang.gettext("Search by name"),
            value="web",
            other="db",
        ),
    )
    check_accessibility(page)

    # The history's view: a day that is not one, a day given twice, a position with a sign.
    page.goto(f"{base}/panel/history/runs?from=2027-02-30&to=2027-03-01&to=2027-03-02")
    _said(
        page,
        lang.gettext(
            "%(field)s: “%(value)s” and “%(other)s”: two values for one field. Give one.",
            field=lang.gettext("Last day"),
            value="2027-03-01",
            other="2027-03-02",
        ),
    )
    check_accessibility(page)
    page.goto(f"{base}/panel/history/events?before=%2B1.1")
    _said(page, lang.gettext("This page could not be found; here is the newest."))
    check_accessibility(page)

    # Enrollment: a bound refused at its field, quoting the value.
    page.goto(f"{base}/panel/enrollment")
    page.locator("#uses").fill("0")
    page.locator("#hours").fill("721")
    page.locator("form[action$='/enrollment'] button[type=submit]").click()
    page.locator("#hours[aria-invalid=true]").wait_for()
    _said(
        page,
        lang.gettext(
            "%(field)s: “%(value)s” is not accepted. Give a whole number from %(low)s to %(high)s.",
            field=lang.gettext("Valid for how many hours"),
            value="721",
            low=lang.number(1),
            high=lang.number(720),
        ),
    )
    check_accessibility(page)

    # A form that gives one field twice: "The form was not sent", naming both values.
    page.goto(f"{base}/panel/enrollment")
    page.locator("form[action$='/enrollment']").evaluate(
        "form => { const extra = document.createElement('input'); extra.type = 'hidden';"
        " extra.name = 'uses'; extra.value = '7'; form.append(extra); }"
    )
    page.locator("#uses").fill("3")
    page.locator("#hours").fill("24")
    page.locator("form[action$='/enrollment'] button[type=submit]").click()
    page.locator("main .error, main [role=alert]").first.wait_for()
    _said(
        page,
        lang.gettext(
            "%(field)s: “%(value)s” and “%(other)s”: two values for one field. Give one.",
            field=lang.gettext("How many hosts may use it"),
            value="3",
            other="7",
        ),
    )
    check_accessibility(page)

    # A secret's form sent again with the token its first sending took: nothing new (409).
    page.goto(f"{base}/panel/enrollment")
    once = page.locator("form[action$='/enrollment'] input[name=once]").get_attribute("value")
    page.locator("#uses").fill("1")
    page.locator("#hours").fill("1")
    page.locator("form[action$='/enrollment'] button[type=submit]").click()
    page.locator("#install-line").wait_for()
    page.goto(f"{base}/panel/enrollment")
    page.locator("form[action$='/enrollment'] input[name=once]").evaluate(
        f"input => {{ input.value = {once!r}; }}"
    )
    page.locator("#uses").fill("1")
    page.locator("#hours").fill("1")
    page.locator("form[action$='/enrollment'] button[type=submit]").click()
    page.locator("#sent-again").wait_for()
    assert page.locator("#install-line").count() == 0
    check_accessibility(page)
