"""In a real browser, in English and Polish: a host whose clock is days behind, said by a real
config poll, is shown on the agent page (how far, which way, what to do) and marked in the list,
and both screens pass axe-core with the notice on them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from control_plane.panel.i18n import Language
from control_plane.panel.wording import host_clock_marker
from ground.instants import format_http_date
from tests.panel.conftest import PanelWorld, check_accessibility

# A real browser through two screens, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

BROWSER_LOCALES = {"en": "en-GB", "pl": "pl-PL"}
BEHIND = timedelta(days=3, hours=2, minutes=30)


def _poll_behind(world: PanelWorld) -> None:
    with httpx.Client(base_url=world.server.base_url, timeout=30) as client:
        now = datetime.fromisoformat(client.get("/healthz").headers["X-Nachtwacht-Server-Time"])
        answer = client.get(
            "/v1/agent/config",
            headers={
                "Authorization": f"Bearer {world.agent_key}",
                "Date": format_http_date(now - BEHIND),
            },
        )
    assert answer.status_code == 200


@pytest.mark.parametrize("code", ["en", "pl"])
def test_the_notice_and_the_marker_in_a_browser(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    _poll_behind(panel_world)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("heading", name=lang.gettext("Agents")).wait_for()
    marker = page.locator("tbody .host-clock")
    offset = -round(BEHIND.total_seconds())
    assert " ".join(marker.inner_text().split()) == " ".join(
        host_clock_marker(lang, offset).split()
    )
    check_accessibility(page)

    page.get_by_role("link", name="web-01").click()
    page.get_by_role("heading", name="web-01").wait_for()
    notice = " ".join(page.locator("#host-clock").inner_text().split())
    assert " ".join(lang.duration(timedelta(days=3, hours=2)).split()) in notice
    assert "timedatectl set-ntp true" in notice
    check_accessibility(page)
