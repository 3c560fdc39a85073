"""In a real browser, in English, Dutch, German and Polish: a hoster's agent list filtered and
sorted into a URL that reproduces the view when opened again, and one schedule set for all 40
agents of the view, recorded as 40 changes by the one panel key that made it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlsplit
from uuid import UUID

import psycopg
import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.test_agent_list_http import add_agents

# A real browser through several screens, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

BROWSER_LOCALES = {"en": "en-GB", "nl": "nl-NL", "de": "de-DE", "pl": "pl-PL"}
SHOPS = [f"shop-{i:02d}" for i in range(40)]


def _changes(world: PanelWorld) -> list[tuple[str, str, object]]:
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "SELECT a.name, c.name, e.data -> 'after' FROM events e"
            " JOIN agents a ON a.id = e.agent_id JOIN credentials c ON c.id = e.actor_id"
            " WHERE e.kind = 'schedule.changed' AND e.org_id = %s ORDER BY a.name",
            [UUID(world.org_id)],
        ).fetchall()
    return [(agent, key, after) for agent, key, after in rows]


@pytest.mark.parametrize("code", ["en", "nl", "de", "pl"])
def test_a_filtered_list_in_the_url_and_one_schedule_for_forty_agents(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    add_agents(panel_world, SHOPS + [f"db-{i:02d}" for i in range(30)])
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    # 71 agents (the world's own web-01 too): two pages.
    everything = lang.ngettext("%(count)s agent", "%(count)s agents", 71, count="71")
    assert everything in page.locator("#found").inner_text()

    page.get_by_label(lang.gettext("Search by name")).fill("SHOP")
    page.get_by_label(lang.gettext("Order")).select_option(label=lang.gettext("Name, Z to A"))
    page.get_by_role("button", name=lang.gettext("Show"), exact=True).click()
    page.wait_for_url("**/panel/agents?*")

    view = parse_qs(urlsplit(page.url).query)
    assert (view["q"], view["sort"]) == (["SHOP"], ["-name"])
    rows = page.locator("tbody th[scope=row]")
    assert rows.all_inner_texts() == sorted(SHOPS, reverse=True)
    check_accessibility(page)

    # The URL is the view: opened in a fresh context (a bookmark), it shows the same list.
    bookmark = page.url
    again = new_page(BROWSER_LOCALES[code])
    again.goto(panel_world.url)
    again.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    again.get_by_role("button", name=lang.gettext("Sign in")).click()
    again.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    again.goto(bookmark)
    assert again.locator("tbody th[scope=row]").all_inner_texts() == sorted(SHOPS, reverse=True)
    assert again.get_by_label(lang.gettext("Search by name")).input_value() == "SHOP"

    page.get_by_label(
        lang.gettext("Update times, separated by commas (for example 02:00, 04:30)")
    ).fill("02:00")
    everyone = lang.ngettext(
        "Set it for the %(count)s agent of this view",
        "Set it for all %(count)s agents of this view",
        40,
        count=lang.number(40),
    )
    page.get_by_role("button", name=everyone).click()
    done = lang.ngettext(
        "The schedule of %(count)s agent changed.",
        "The schedules of %(count)s agents changed.",
        40,
        count=lang.number(40),
    )
    page.get_by_role("status").filter(has_text=done).wait_for()

    changes = _changes(panel_world)
    assert [agent for agent, _, _ in changes] == SHOPS
    assert {(key, str(after)) for _, key, after in changes} == {
        ("first panel key", str({"times": ["02:00"], "enabled": True}))
    }
    # Shown on the list as the agents' schedule.
    assert page.locator("tbody tr").first.inner_text().count("02:00") >= 1
