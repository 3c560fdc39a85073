"""The rollout screens in a real browser. In each of the nine languages: the releases' stages, a
halt refused without a reason (the message next to its field) and then made, the automatic halt's
notice and the count in the navigation (gone once it is marked read), an organisation and an
operator's agent page (a pin refused at its field, then set; a hold refused at its field, set and
ended), the customer's agent list and page with a hold — each checked with axe-core and left
without an English sentence. With the keyboard alone: halting a release, an operator's hold,
marking a notice read, forcing an update, a customer's hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.operator_support import agent_reports, publish_releases
from tests.panel.test_browser_languages import BROWSER_LOCALES
from tests.panel.test_browser_progress_webhook_releases_keys import (
    _doc_screenshot,
    _english_sentences,
    _no_english,
    _sign_in,
    _tab_to,
    _tab_to_text,
)
from tests.panel.test_rollout_http import _release_ids, halt_by_errors

# A real browser through many screens, 6-13 s a test: started first (tests/conftest.py).
pytestmark = pytest.mark.slow


def _checked(page: Any, code: str, english: set[str], name: str | None = None) -> None:
    check_accessibility(page)
    _no_english(page, code, english)
    if name is not None:
        _doc_screenshot(page, name, code)


@pytest.mark.parametrize("code", LANGUAGES)
def test_rollout_screens_in_each_language(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    english = _english_sentences()
    publish_releases(panel_world, ("1.5.0", 42), ("1.6.0", 43))
    agent_reports(panel_world, "1.5.0")
    ids = _release_ids(panel_world)
    halt_by_errors(panel_world, ids["1.5.0"])
    page = new_page(BROWSER_LOCALES[code])
    _sign_in(page, panel_world, lang, panel_world.server.create_operator_key())
    page.get_by_role("heading", name=lang.gettext("Operations")).wait_for()
    rollout = page.locator('section[aria-labelledby="rollout-heading"]')
    assert "1.6.0" in rollout.inner_text()
    _checked(page, code, english)

    # The navigation counts the unread notice; the inbox words it.
    notices = page.get_by_role("link", name=lang.gettext("Notices"))
    assert lang.gettext("(%(count)s new)", count=lang.number(1)) in notices.inner_text()
    notices.click()
    page.get_by_role("heading", name=lang.gettext("Notices")).wait_for()
    assert "1.5.0" in page.locator("ul.inbox").inner_text()
    _checked(page, code, english, "notices")
    # Marked read: the count of new notices is gone.
    page.get_by_role("button", name=lang.gettext("Mark as read")).click()
    page.get_by_role("heading", name=lang.gettext("Notices")).wait_for()
    assert lang.gettext("Mark as read") not in page.locator("ul.inbox").inner_text()
    notices = page.get_by_role("link", name=lang.gettext("Notices"))
    assert lang.gettext("(%(count)s new)", count=lang.number(1)) not in notices.inner_text()
    _checked(page, code, english)

    page.get_by_role("link", name=lang.gettext("Releases"), exact=True).click()
    row = page.locator(f"#release-{ids['1.6.0']}")
    assert lang.gettext("canary (a first few agents)") in row.inner_text()
    halted = page.locator(f"#release-{ids['1.5.0']}")
    assert lang.gettext("Resume") in halted.inner_text()
    row.get_by_role("button", name=lang.gettext("Halt"), exact=True).click()
    error = page.locator(f"#rollout-reason-{ids['1.6.0']}-error")
    assert error.inner_text() == lang.gettext(
        "Give a reason of at most %(count)s characters.", count=lang.number(500)
    )
    page.get_by_label(
        lang.gettext("Why? (required for every action on %(version)s)", version="1.6.0")
    ).fill("TLS breaks")
    page.locator(f"#release-{ids['1.6.0']}").get_by_role(
        "button", name=lang.gettext("Halt"), exact=True
    ).click()
    page.get_by_role("status").filter(
        has_text=lang.gettext("The release is halted: no agent starts it until it is resumed.")
    ).wait_for()
    assert "TLS breaks" in page.locator(f"#release-{ids['1.6.0']}").inner_text()
    _checked(page, code, english, "releases-rollout")

    page.get_by_role("link", name=lang.gettext("Organisations"), exact=True).click()
    page.get_by_role("link", name="Acme").click()
    page.get_by_role("heading", name=lang.gettext("The organisation's pin")).wait_for()
    _checked(page, code, english, "org")
    page.get_by_role("link", name="web-01").click()
    pin = page.locator('section[aria-labelledby="pin-heading"]')
    pin.get_by_label(lang.gettext("Version to pin to")).fill("9.9.9")
    pin.get_by_label(lang.gettext("Why? (required)")).fill("audit")
    pin.get_by_role("button", name=lang.gettext("Pin"), exact=True).click()
    assert page.locator("#agent-pin-version-error").inner_text() == lang.gettext(
        "Give the version of a published release that is not withdrawn, or choose to hold at"
        " the version it runs."
    )
    pin = page.locator('section[aria-labelledby="pin-heading"]')
    pin.get_by_label(lang.gettext("Version to pin to")).fill("1.5.0")
    pin.get_by_label(lang.gettext("Why? (required)")).fill("audit")
    pin.get_by_role("button", name=lang.gettext("Pin"), exact=True).click()
    page.get_by_role("status").filter(has_text=lang.gettext("The pin is set.")).wait_for()
    _checked(page, code, english, "operator-agent")

    # The operator's hold of the agent: a day in the past refused at its field, then set.
    hold = page.locator("#hold")
    hold.get_by_label(lang.gettext("Hold until (updates run again from this day)")).fill(
        "2027-03-20"
    )
    hold.get_by_label(lang.gettext("Why? (required)")).fill("incident 12")
    hold.get_by_role("button", name=lang.gettext("Hold the updates")).click()
    assert page.locator("#hold-until-error").inner_text() == lang.gettext(
        "Choose a day after today, at most %(count)s days ahead.", count=lang.number(90)
    )
    _checked(page, code, english)
    hold = page.locator("#hold")
    hold.get_by_label(lang.gettext("Hold until (updates run again from this day)")).fill(
        "2027-04-02"
    )
    hold.get_by_label(lang.gettext("Why? (required)")).fill("incident 12")
    hold.get_by_role("button", name=lang.gettext("Hold the updates")).click()
    page.get_by_role("status").filter(has_text=lang.gettext("The agent is held.")).wait_for()
    assert "incident 12" in page.locator("#hold").inner_text()
    _checked(page, code, english, "operator-agent-held")
    page.get_by_role("button", name=lang.gettext("End the hold")).click()
    page.get_by_role("status").filter(
        has_text=lang.gettext("The hold is ended: scheduled updates run again.")
    ).wait_for()

    page.get_by_role("button", name=lang.gettext("Sign out")).click()
    _sign_in(page, panel_world, lang, panel_world.panel_key)
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    page.get_by_role("link", name="web-01").click()
    page.get_by_label(lang.gettext("Hold until (updates run again from this day)")).fill(
        "2027-04-02"
    )
    page.get_by_label(lang.gettext("Why? (required)")).fill("audit week")
    page.get_by_role("button", name=lang.gettext("Hold the updates")).click()
    page.get_by_role("status").filter(has_text=lang.gettext("The agent is held.")).wait_for()
    _checked(page, code, english, "agent-hold")
    page.get_by_role("link", name=lang.gettext("All agents")).click()
    assert lang.gettext("set in the panel") in page.locator("table.list").inner_text()
    _checked(page, code, english, "agents-held")


def test_halt_force_and_hold_with_the_keyboard_alone(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    publish_releases(panel_world, ("1.5.0", 42), ("1.6.0", 43))
    ids = _release_ids(panel_world)
    page = new_page("en-GB")
    page.goto(panel_world.url)
    _tab_to(page, "key")
    page.keyboard.type(panel_world.server.create_operator_key())
    page.keyboard.press("Enter")
    page.get_by_role("heading", name=lang.gettext("Operations")).wait_for()

    # Halt: the reason, then Tab to the form's buttons (promote comes first), Enter on Halt.
    page.goto(panel_world.url + "operator/releases")
    _tab_to(page, f"rollout-reason-{ids['1.6.0']}")
    page.keyboard.type("bad build")
    for _ in range(5):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.value") == "halt":
            break
    assert page.evaluate("document.activeElement.value") == "halt"
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(
        has_text=lang.gettext("The release is halted: no agent starts it until it is resumed.")
    ).wait_for()
    assert "bad build" in page.locator(f"#release-{ids['1.6.0']}").inner_text()

    # An operator's hold: the day (typed into the date field), the reason, Enter.
    page.goto(panel_world.url + f"operator/orgs/{panel_world.org_id}/agents/{panel_world.agent_id}")
    _tab_to(page, "hold-until")
    page.keyboard.type("04022027")  # en-GB's date field: day, month, year
    _tab_to(page, "hold-reason")
    page.keyboard.type("incident 12")
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(has_text=lang.gettext("The agent is held.")).wait_for()
    assert "incident 12" in page.locator("#hold").inner_text()

    # A notice marked read: Tab to its button, Enter.
    halt_by_errors(panel_world, ids["1.5.0"])
    page.goto(panel_world.url + "operator/notices")
    _tab_to_text(page, lang.gettext("Mark as read"))
    page.keyboard.press("Enter")
    page.get_by_role("heading", name=lang.gettext("Notices")).wait_for()
    assert lang.gettext("Mark as read") not in page.locator("ul.inbox").inner_text()

    # A forced update: the reason and Enter.
    page.goto(panel_world.url + f"operator/orgs/{panel_world.org_id}/agents/{panel_world.agent_id}")
    _tab_to(page, "force-reason")
    page.keyboard.type("hotfix for the halted build")
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(
        has_text=lang.gettext("A forced update is asked for: the agent starts it at its next poll.")
    ).wait_for()

    # The customer's hold: the day (typed into the date field), the reason, Enter.
    page.goto(panel_world.url + "sign-in")
    page.get_by_role("button", name=lang.gettext("Sign out")).click()
    page.goto(panel_world.url)
    _tab_to(page, "key")
    page.keyboard.type(panel_world.panel_key)
    page.keyboard.press("Enter")
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    page.goto(panel_world.url + f"agents/{panel_world.agent_id}")
    _tab_to(page, "hold-until")
    page.keyboard.type("04022027")  # en-GB's date field: day, month, year
    _tab_to(page, "hold-reason")
    page.keyboard.type("audit week")
    page.keyboard.press("Enter")
    page.get_by_role("status").filter(has_text=lang.gettext("The agent is held.")).wait_for()
    assert "audit week" in page.locator("#hold").inner_text()
