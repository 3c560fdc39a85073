"""In a real browser, in each of the nine languages: sign in, change a schedule, see a bad time
refused in that language next to its field, see the spring night's daylight saving note, hold the
agent until a day (a day in the past refused next to its field; the hold's end in CLDR's words),
end the hold, sign out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from control_plane.panel.rollout_wording import hold_text
from control_plane.panel.wording import wall_time_note
from ground.contract import HoldView
from shared_planner import describe_wall_time
from tests.panel.conftest import PanelWorld

# A real browser through many screens, 6-13 s a test: started first (tests/conftest.py).
pytestmark = pytest.mark.slow

AMSTERDAM = ZoneInfo("Europe/Amsterdam")
# What the browser sends as Accept-Language; the panel must pick the language from it.
BROWSER_LOCALES = {
    "nl": "nl-NL",
    "en": "en-GB",
    "de": "de-DE",
    "fr": "fr-FR",
    "es": "es-ES",
    "it": "it-IT",
    "pt": "pt-BR",
    "pl": "pl-PL",
    "sv": "sv-SE",
}
ENGLISH_OFF_GRID = "is not on the five-minute grid"
ENGLISH_SPRING = "does not exist on"


@pytest.mark.parametrize("code", LANGUAGES)
def test_schedule_in_each_language(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    assert page.locator("html").get_attribute("lang") == code

    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    page.get_by_role("link", name="web-01").click()

    page.get_by_label(lang.gettext("Time %(number)s", number=1), exact=True).fill("02:30")
    page.get_by_role("button", name=lang.gettext("Add a time")).click()
    second = page.get_by_label(lang.gettext("Time %(number)s", number=2), exact=True)
    second.fill("03:07")
    page.get_by_role("button", name=lang.gettext("Save the schedule")).click()

    refused = lang.gettext(
        "%(value)s is not on the five-minute grid (for example 03:05 or 03:10).", value="03:07"
    )
    error = page.locator("#time-1-error")
    assert error.inner_text() == refused
    second = page.locator("#time-1")
    assert second.get_attribute("aria-invalid") == "true"
    assert second.get_attribute("aria-describedby") == "time-1-error"
    if code != "en":
        assert ENGLISH_OFF_GRID not in page.content()

    second.fill("04:00")
    page.get_by_role("button", name=lang.gettext("Save the schedule")).click()
    page.get_by_role("status").filter(has_text=lang.gettext("The schedule is saved.")).wait_for()

    note = wall_time_note(
        lang, describe_wall_time(date(2027, 3, 28), time(2, 30), AMSTERDAM), AMSTERDAM
    )
    assert note is not None
    preview = page.locator("#preview")
    assert note in preview.inner_text()
    # CLDR decides "03:30" or "3:30 AM"; the zone's abbreviation is the clock's own.
    assert "3:30" in note
    assert "CEST" in note
    if code != "en":
        assert ENGLISH_SPRING not in page.content()

    _hold_and_end(page, lang)

    page.get_by_role("button", name=lang.gettext("Sign out")).click()
    page.get_by_role("status").filter(has_text=lang.gettext("You are signed out.")).wait_for()
    page.goto(panel_world.url + f"agents/{panel_world.agent_id}")
    assert "/panel/sign-in" in page.url


def test_the_chosen_language_is_remembered_after_signing_out(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    page = new_page("en-GB")
    page.goto(panel_world.url)
    page.get_by_role("link", name="Svenska").click()
    assert page.locator("html").get_attribute("lang") == "sv"
    sv = Language("sv")
    page.get_by_label(sv.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=sv.gettext("Sign in")).click()
    page.get_by_role("button", name=sv.gettext("Sign out")).click()
    page.goto(panel_world.url)
    assert page.locator("html").get_attribute("lang") == "sv"


def _hold_and_end(page: Any, lang: Language) -> None:
    """On the agent page: a day in the past refused next to its field, then a hold until
    2 April (shown by CLDR in the reader's language, with who set it), then ended."""
    until = page.get_by_label(lang.gettext("Hold until (updates run again from this day)"))
    until.fill("2027-03-20")
    page.get_by_label(lang.gettext("Why? (required)")).fill("audit")
    page.get_by_role("button", name=lang.gettext("Hold the updates")).click()
    refused = lang.gettext("Choose a day after today, at most %(count)s days ahead.", count=90)
    assert page.locator("#hold-until-error").inner_text() == refused
    assert page.locator("#hold-until").get_attribute("aria-invalid") == "true"

    page.locator("#hold-until").fill("2027-04-02")
    page.get_by_role("button", name=lang.gettext("Hold the updates")).click()
    page.get_by_role("status").filter(has_text=lang.gettext("The agent is held.")).wait_for()
    held = hold_text(
        lang,
        HoldView(until=datetime(2027, 4, 2, tzinfo=AMSTERDAM), reason="audit", set_by="customer"),
        AMSTERDAM,
    )
    assert held in page.locator("#hold").inner_text()
    page.get_by_role("button", name=lang.gettext("End the hold")).click()
    page.get_by_role("status").filter(
        has_text=lang.gettext("The hold is ended: scheduled updates run again.")
    ).wait_for()
