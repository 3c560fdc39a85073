"""On a phone (390 px wide), in English, Dutch, German and Polish: every customer's and
operator's page fits the width — the document never scrolls sideways — with the data of a busy
organisation (eighty agents with long names, three pairs, last night's outcomes and misses)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import Language
from tests.panel.busy_world import BusyWorld, busy_world
from tests.panel.conftest import PanelWorld

# A real browser through every screen, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

PHONE_WIDTH = 390
BROWSER_LOCALES = {"en": "en-GB", "nl": "nl-NL", "de": "de-DE", "pl": "pl-PL"}

# What sticks out past the window's right edge, named, so a failure says where to look.
WIDER_THAN_THE_WINDOW = """() => {
    const width = document.documentElement.clientWidth;
    const sticking = [];
    for (const element of document.body.querySelectorAll('*')) {
        const box = element.getBoundingClientRect();
        if (box.right > width + 0.5 && box.width > 0) {
            let scrolled = false;
            for (let up = element.parentElement; up; up = up.parentElement) {
                const overflow = getComputedStyle(up).overflowX;
                if (overflow === 'auto' || overflow === 'scroll' || overflow === 'hidden') {
                    scrolled = true;
                    break;
                }
            }
            if (!scrolled) {
                sticking.push(element.tagName.toLowerCase() + '.' + element.className + ' '
                    + Math.round(box.right) + 'px: ' + (element.textContent || '').slice(0, 40));
            }
        }
    }
    return {
        scrollWidth: document.documentElement.scrollWidth,
        width: width,
        sticking: sticking.slice(0, 8),
    };
}"""


def _fits(page: Any, where: str) -> None:
    page.wait_for_load_state()
    measured = page.evaluate(WIDER_THAN_THE_WINDOW)
    assert measured["width"] == PHONE_WIDTH
    assert measured["scrollWidth"] <= measured["width"], (where, measured)


def _signed_in(new_page: Callable[..., Any], world: PanelWorld, code: str, key: str) -> Any:
    lang = Language(code)
    page = new_page(BROWSER_LOCALES[code], width=PHONE_WIDTH, height=844)
    page.goto(world.url)
    _fits(page, "sign-in")
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.wait_for_url("**/panel/*")
    return page


@pytest.mark.parametrize("code", list(BROWSER_LOCALES))
def test_every_page_fits_a_phone(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    busy: BusyWorld = busy_world(panel_world)
    world = busy.world
    world.server.admin(
        "enrollment-token",
        "create",
        "--org",
        world.org_id,
        "--uses",
        "25",
        "--name-pattern",
        "db-replica-frankfurt-rack-07-*.customer-infrastructure.example.internal",
        "--label",
        "Frankfurt rack seven, the replicas moved in from the old datacentre",
    )
    agent = busy.agent_ids[0]

    customer = _signed_in(new_page, world, code, world.panel_key)
    for path in (
        "agents",
        "agents?page=2",
        f"agents/{agent}",
        f"agents/{agent}/updates/{busy.manual_run_id}",
        "agents/not-an-agent",
        "notifications",
        "forecast",
        "webhook",
        "enrollment",
    ):
        customer.goto(world.url + path)
        _fits(customer, path)

    operator = _signed_in(new_page, world, code, busy.operator_key)
    for path in (
        "operator",
        "operator/releases",
        "operator/orgs",
        f"operator/orgs/{world.org_id}",
        f"operator/orgs/{world.org_id}/agents/{agent}",
        "operator/notices",
        "operator/credentials",
        f"operator/credentials/{busy.operator_key_id}/revoke",
    ):
        operator.goto(world.url + path)
        _fits(operator, path)
