"""In a real browser: in English, Dutch, German and Polish, an agent's history paged back to the
retention limit through a range chosen in the form (the range kept by every link), downloaded as
CSV with a hostile agent's formulas defused, and the agents per version night by night; in all
nine languages, no two texts of the versions picture overlap."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.history_world import HOSTILE_ERROR, HOSTILE_NAME, add_agent, add_nights
from tests.panel.test_browser_chart_texts import _pictures
from tests.panel.test_browser_languages import BROWSER_LOCALES

# A real browser through several screens, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

# Versions as releases name them, more of them than the picture has colours.
VERSIONS = [f"2.{minor}.0-rc.{minor + 10}+build.2027031{minor}" for minor in range(8)]


def _signed_in(new_page: Callable[..., Any], world: PanelWorld, lang: Language) -> Any:
    page = new_page(BROWSER_LOCALES[lang.code])
    page.goto(world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    return page


def _view_of(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def _view(page: Any) -> dict[str, list[str]]:
    return _view_of(page.url)


@pytest.mark.parametrize("code", ["en", "nl", "de", "pl"])
def test_an_agents_history_paged_downloaded_and_the_versions_per_night(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any], tmp_path: Path
) -> None:
    lang = Language(code)
    add_nights(panel_world, panel_world.agent_id, 120, version="2.4.0")
    hostile = add_agent(panel_world, HOSTILE_NAME)
    add_nights(panel_world, hostile, 20, version="2.4.1", error=HOSTILE_ERROR)
    page = _signed_in(new_page, panel_world, lang)

    page.goto(f"{panel_world.url}agents/{panel_world.agent_id}")
    page.get_by_role("link", name=lang.gettext("All updates of this agent")).click()
    page.wait_for_url("**/panel/history/runs?*")
    page.get_by_label(lang.gettext("First day")).fill("2026-12-01")
    page.get_by_label(lang.gettext("Last day")).fill("2027-03-26")
    page.get_by_role("button", name=lang.gettext("Show"), exact=True).click()
    page.wait_for_url("**from=2026-12-01*")
    check_accessibility(page)
    seen = page.locator("ul.history > li").count()
    assert seen == 50
    page.get_by_role("link", name=lang.gettext("Older"), exact=True).click()
    page.wait_for_url("**before=*")
    view = _view(page)
    assert (view["agent"], view["from"], view["to"]) == (
        [panel_world.agent_id],
        ["2026-12-01"],
        ["2027-03-26"],
    )
    seen += page.locator("ul.history > li").count()
    assert page.locator("p.history-end").count() == 0
    page.get_by_role("link", name=lang.gettext("Older"), exact=True).click()
    page.wait_for_url(lambda url: _view_of(url).get("before", [""]) != view["before"])
    seen += page.locator("ul.history > li").count()
    # 1 December to 26 March: 116 nights of the 120, on three pages.
    assert seen == 116
    assert page.get_by_role("link", name=lang.gettext("Older"), exact=True).count() == 0
    removed = lang.ngettext(
        "Updates older than %(count)s day are removed, with their timeline.",
        "Updates older than %(count)s days are removed, with their timeline.",
        400,
        count=lang.number(400),
    )
    assert page.locator("p.history-end").inner_text() == removed
    page.get_by_role("link", name=lang.gettext("Newer"), exact=True).click()
    page.wait_for_url("**after=*")
    assert _view(page)["from"] == ["2026-12-01"]
    assert page.locator("ul.history > li").count() == 50
    assert _view(page)["after"]

    # The whole organisation's updates of the last three weeks, as a file.
    page.goto(f"{panel_world.url}history/runs?from=2027-03-06&to=2027-03-26")
    with page.expect_download() as download:
        page.get_by_role("link", name=lang.gettext("Download as CSV")).click()
    saved = tmp_path / "runs.csv"
    download.value.save_as(saved)
    rows = list(csv.DictReader(io.StringIO(saved.read_text(encoding="utf-8"))))
    assert len(rows) == 21 + 20
    hostile_rows = [row for row in rows if row["agent_id"] == hostile]
    assert {row["agent_name"] for row in hostile_rows} == {"'" + HOSTILE_NAME}
    assert {row["error"] for row in hostile_rows} == {"'" + HOSTILE_ERROR}

    page.get_by_role(
        "link", name=lang.gettext("Agents per version at the end of each night")
    ).click()
    page.wait_for_url("**/history/versions")
    page.get_by_label(lang.gettext("Nights")).select_option("30")
    page.get_by_role("button", name=lang.gettext("Show"), exact=True).click()
    page.wait_for_url("**nights=30")
    assert page.locator("svg.chart g").count() == 30
    check_accessibility(page)


@pytest.mark.parametrize("code", LANGUAGES)
def test_no_two_texts_of_the_versions_picture_overlap(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    for number, version in enumerate(VERSIONS):
        for copy in range(1 + number % 3):
            agent = add_agent(panel_world, f"host-{number}-{copy}")
            add_nights(panel_world, agent, 10 * (number + 1), version=version)
    page = _signed_in(new_page, panel_world, Language(code))
    for nights in (7, 14, 30):
        page.goto(f"{panel_world.url}history/versions?nights={nights}")
        _pictures(page, least=1)
