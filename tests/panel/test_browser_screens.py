"""Every screen in a real browser (English and Dutch), each checked with axe-core; the schedule
editor used with the keyboard alone; the operator's brake with its required reason."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility, doc_screenshot
from tests.panel.operator_support import agent_reports, publish_releases

# A real browser through many screens, 6-13 s a test: started first (tests/conftest.py).
pytestmark = pytest.mark.slow


def _seed_history(world: PanelWorld) -> None:
    """A few nights of history as the claim path and the reconcile worker would leave it."""
    body = {
        "kind": "scheduled_updates",
        "slot": {"key": "2027-03-26T03:00", "at": "2027-03-26T02:00:00Z"},
        "counts": {
            "agents": 3,
            "updated": 1,
            "up_to_date": 1,
            "failed": 0,
            "rolled_back": 0,
            "missed": 1,
            "no_outcome": 0,
        },
        "updated": [{"version": "1.5.0", "count": 1}],
        "missed_by_reason": {"offline": 1},
        "missed": [{"agent_id": world.agent_id, "name": "web-01", "reason": "offline"}],
        "not_updated_for_three_days": [],
        "summary": "an English line the panel must not show",
    }
    with psycopg.connect(world.server.database_url) as conn:
        for key, at, status, reason, error in (
            ("2027-03-24T03:00", "2027-03-24T02:00Z", "up_to_date", None, None),
            ("2027-03-25T03:00", "2027-03-25T02:00Z", "rolled_back", None, "not healthy in 120 s"),
            ("2027-03-26T03:00", "2027-03-26T02:00Z", "missed", "offline", None),
        ):
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                " miss_reason, version, error, created_at, finished_at)"
                " VALUES (%s, %s, 'schedule', %s, %s, %s, %s, '1.4.1', %s, %s, %s)",
                [world.agent_id, world.org_id, key, at, status, reason, error, at, at],
            )
            if status != "missed":
                conn.execute(
                    "INSERT INTO events (org_id, agent_id, kind, actor_kind, at, data)"
                    " VALUES (%s, %s, %s, 'schedule', %s, %s)",
                    [world.org_id, world.agent_id, f"update.{status}", at, json.dumps({})],
                )
        conn.execute(
            "INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)"
            " VALUES (%s, '2027-03-26T03:00', '2027-03-26T02:00Z', '2027-03-26T02:20Z', %s)",
            [world.org_id, json.dumps(body)],
        )


def _sign_in(page: Any, world: PanelWorld, lang: Language, key: str) -> None:
    page.goto(world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()


@pytest.mark.parametrize("code", ["en", "nl"])
def test_every_customer_screen(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    _seed_history(panel_world)
    page = new_page({"en": "en-GB", "nl": "nl-NL"}[code])
    page.goto(panel_world.url)
    check_accessibility(page)
    doc_screenshot(page, f"sign-in-{code}")
    _sign_in(page, panel_world, lang, panel_world.panel_key)

    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    assert "web-01" in page.inner_text("table")
    check_accessibility(page)
    doc_screenshot(page, f"agents-{code}")

    page.get_by_role("link", name="web-01").click()
    timeline = page.locator(".timeline").inner_text()
    assert lang.gettext("The schedule found the agent already up to date.") in timeline
    runs = page.locator(".runs").inner_text()
    assert lang.gettext("missed: %(reason)s", reason=lang.gettext("offline")) in runs
    page.get_by_role("button", name=lang.gettext("Update now")).click()
    # The click leads to the update's own page, which follows it to its outcome.
    page.get_by_role("heading", name=lang.gettext("Update of %(name)s", name="web-01")).wait_for()
    page.get_by_role("link", name=lang.gettext("Back to %(name)s", name="web-01")).click()
    assert lang.gettext("waiting for the agent") in page.locator(".runs").inner_text()
    assert lang.gettext("Someone in your organisation asked for an update now.") in (
        page.locator(".timeline").inner_text()
    )
    page.get_by_label(lang.gettext("Time %(number)s", number=1), exact=True).fill("02:30")
    page.get_by_role("button", name=lang.gettext("Save the schedule")).click()
    page.get_by_text(lang.gettext("The schedule is saved.")).wait_for()
    check_accessibility(page)
    doc_screenshot(page, f"agent-{code}")
    page.get_by_label(lang.gettext("Time %(number)s", number=1), exact=True).fill("2:61")
    page.get_by_role("button", name=lang.gettext("Save the schedule")).click()
    page.locator("#time-0-error").wait_for()
    check_accessibility(page)
    doc_screenshot(page, f"agent-error-{code}")

    page.get_by_role("link", name=lang.gettext("Notifications")).click()
    inbox = page.locator(".inbox").inner_text()
    assert "an English line" not in inbox
    assert (
        lang.ngettext(
            "%(count)s updated to %(version)s.",
            "%(count)s updated to %(version)s.",
            1,
            count="1",
            version="1.5.0",
        )
        in inbox
    )
    check_accessibility(page)
    doc_screenshot(page, f"notifications-{code}")
    page.get_by_role("button", name=lang.gettext("Mark as read")).click()
    page.get_by_role("button", name=lang.gettext("Mark as unread")).wait_for()

    page.get_by_role("link", name=lang.gettext("Webhook")).click()
    page.get_by_label(lang.gettext("Address (https://…)")).fill("ftp://example.test/hook")
    page.get_by_role("button", name=lang.gettext("Save the webhook")).click()
    assert page.locator("#url").get_attribute("aria-invalid") == "true"
    check_accessibility(page)
    page.get_by_label(lang.gettext("Address (https://…)")).fill("https://example.test/hook")
    page.get_by_role("button", name=lang.gettext("Save the webhook")).click()
    assert "nwh_" in page.locator("code").inner_text()
    check_accessibility(page)

    page.get_by_role("link", name=lang.gettext("Tonight")).click()
    assert page.locator("svg.chart").count() == 1
    check_accessibility(page)
    doc_screenshot(page, f"forecast-{code}")


def test_operator_screens_and_the_brakes_required_reason(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    _seed_history(panel_world)
    # A small fleet on two versions, for the fleet-by-version picture.
    publish_releases(panel_world, ("1.5.0", 42), ("1.6.0", 43))
    agent_reports(panel_world, "1.6.0")
    for number in range(2, 5):
        panel_world.server.enroll_agent(panel_world.org_id, f"web-0{number}")
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "UPDATE agents SET current_version = '1.5.0' WHERE name IN ('web-02', 'web-03')"
        )
    key = panel_world.server.create_operator_key()
    page = new_page("en-GB")
    _sign_in(page, panel_world, lang, key)
    page.get_by_role("heading", name=lang.gettext("Operations")).wait_for()
    assert page.locator('section[aria-labelledby="fleet-heading"] svg.chart').count() == 1
    check_accessibility(page)
    page.get_by_role("button", name=lang.gettext("Engage the brake")).click()
    assert page.locator("#reason").get_attribute("aria-invalid") == "true"
    page.get_by_label(lang.gettext("Reason (required; agents and colleagues see it)")).fill(
        "1.5.0 breaks TLS"
    )
    page.get_by_role("button", name=lang.gettext("Engage the brake")).click()
    assert "1.5.0 breaks TLS" in page.locator(".warning").inner_text()
    # Three nights ahead (the forecast) and three pictures of the last 24 hours.
    assert page.locator('section[aria-labelledby="night-heading"] svg.chart').count() == 3
    assert page.locator('section[aria-labelledby="past-heading"] svg.chart').count() == 3
    check_accessibility(page)
    doc_screenshot(page, "operator-en")
    page.get_by_role("button", name=lang.gettext("Release the brake")).click()
    page.get_by_text(lang.gettext("The brake is off: scheduled updates run.")).wait_for()


def _tab_to(page: Any, element_id: str, limit: int = 60) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
            return
    raise AssertionError(f"Tab never reached #{element_id}")


def _tab_to_button(page: Any, name: str, limit: int = 60) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.innerText") == name:
            return
    raise AssertionError(f"Tab never reached the button {name!r}")


def test_the_schedule_editor_with_the_keyboard_alone(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    page = new_page("en-GB")
    page.goto(panel_world.url)
    _tab_to(page, "key")
    page.keyboard.type(panel_world.panel_key)
    page.keyboard.press("Enter")
    page.get_by_role("heading", name="Agents").wait_for()
    _tab_to_button(page, "web-01")
    page.keyboard.press("Enter")
    page.locator("#schedule-form").wait_for()

    _tab_to(page, "time-0")
    page.keyboard.press("Control+A")
    page.keyboard.type("04:00")
    _tab_to_button(page, lang.gettext("Add a time"))
    page.keyboard.press("Enter")
    page.locator("#time-1").wait_for()
    _tab_to(page, "time-1")
    page.keyboard.type("05:30")
    # Enter in a field saves (the form's first button), never removes a row.
    page.keyboard.press("Enter")
    page.get_by_text(lang.gettext("The schedule is saved.")).wait_for()
    assert page.locator("#time-0").input_value() == "04:00"
    assert page.locator("#time-1").input_value() == "05:30"


def test_the_api_docs_render_without_the_internet(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    page = new_page("en-GB")
    page.goto(panel_world.server.base_url + "/docs")
    page.locator(".swagger-ui .info .title").wait_for()
    assert "nachtwacht control plane" in page.locator(".swagger-ui .info .title").inner_text()
