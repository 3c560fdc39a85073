"""In a real browser, in English, Dutch, German and Polish: the agent list filtered to the agents
not on the release they are offered, a hold for every agent of that view (a day in the past
refused at its field first), an update now for two ticked agents — one change per agent on the
trail, by the panel key that made it — and the schedule for new agents, taken by the next agent
that enrols."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import psycopg
import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.test_fleet_bulk_http import BEHIND, seed_offer_fleet, trail

# A real browser through several screens, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

BROWSER_LOCALES = {"en": "en-GB", "nl": "nl-NL", "de": "de-DE", "pl": "pl-PL"}
HOLD_UNTIL = "Hold until (updates run again from this day)"


@pytest.mark.parametrize("code", ["en", "nl", "de", "pl"])
def test_hold_a_filtered_view_update_two_and_a_schedule_for_new_agents(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    ids = seed_offer_fleet(panel_world)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()

    page.get_by_label(lang.gettext("State")).select_option(
        label=lang.gettext("Not on the release it is offered")
    )
    page.get_by_role("button", name=lang.gettext("Show"), exact=True).click()
    page.wait_for_url("**/panel/agents?*")
    assert parse_qs(urlsplit(page.url).query)["state"] == ["behind"]
    assert page.locator("tbody th[scope=row]").all_inner_texts() == BEHIND
    page.get_by_label(lang.gettext("Search by name")).fill("old")
    page.get_by_role("button", name=lang.gettext("Show"), exact=True).click()
    page.wait_for_url("**q=old*")
    assert len(page.locator("tbody th[scope=row]").all_inner_texts()) == 4

    everyone = page.get_by_role(
        "button",
        name=lang.ngettext(
            "Do it for the %(count)s agent of this view",
            "Do it for all %(count)s agents of this view",
            4,
            count=lang.number(4),
        ),
    )
    page.get_by_label(lang.gettext(HOLD_UNTIL)).fill("2027-03-20")
    page.get_by_label(lang.gettext("Why? (required)")).fill("quarter close")
    everyone.click()
    refused = lang.gettext("Choose a day after today, at most %(count)s days ahead.", count=90)
    page.locator("#bulk-until-error").wait_for()
    assert page.locator("#bulk-until-error").inner_text() == refused
    assert page.locator("#bulk-until").get_attribute("aria-invalid") == "true"
    assert trail(panel_world, "hold.set") == []

    page.get_by_label(lang.gettext(HOLD_UNTIL)).fill("2027-04-02")
    everyone.click()
    held = lang.ngettext(
        "%(count)s agent is held until %(day)s.",
        "%(count)s agents are held until %(day)s.",
        4,
        count=lang.number(4),
        day=lang.day(date(2027, 4, 2)),
    )
    page.get_by_role("status").filter(has_text=held).wait_for()
    assert trail(panel_world, "hold.set") == [
        (f"old-{i}", "user", "first panel key") for i in range(4)
    ]
    check_accessibility(page)

    page.locator(f"#select-{ids['old-0']}").check()
    page.locator(f"#select-{ids['old-1']}").check()
    page.get_by_label(
        lang.gettext("Update now (through the caps, like one agent's update now)")
    ).check()
    page.get_by_role("button", name=lang.gettext("Do it for the selected agents")).click()
    asked = lang.ngettext(
        "An update now was asked for %(count)s agent; it goes through the caps like any other.",
        "An update now was asked for %(count)s agents; each goes through the caps like any other.",
        2,
        count=lang.number(2),
    )
    page.get_by_role("status").filter(has_text=asked).wait_for()
    assert trail(panel_world, "update.requested") == [
        ("old-0", "user", "first panel key"),
        ("old-1", "user", "first panel key"),
    ]

    page.get_by_role("link", name=lang.gettext("Schedule for new agents")).click()
    page.get_by_role("heading", name=lang.gettext("Schedule for new agents")).wait_for()
    page.get_by_label(
        lang.gettext("Update times, separated by commas (for example 02:00, 04:30)")
    ).fill("01:00, 04:30")
    page.get_by_role("button", name=lang.gettext("Save the schedule for new agents")).click()
    page.get_by_role("status").filter(
        has_text=lang.gettext("Saved. Agents that enrol from now on take this schedule.")
    ).wait_for()
    check_accessibility(page)
    panel_world.server.enroll_agent(panel_world.org_id, "late")
    with psycopg.connect(panel_world.server.database_url) as conn:
        rows = conn.execute(
            "SELECT name, update_schedule_times FROM agents WHERE org_id = %s"
            " AND name IN ('late', 'old-0') ORDER BY name",
            [UUID(panel_world.org_id)],
        ).fetchall()
    assert rows == [("late", ["01:00", "04:30"]), ("old-0", ["03:00"])]
