"""A reload in a real browser after a form that acts: the browser's own "resend" must not act
again. The test delivery answers with a redirect, so a reload opens the page and sends nothing;
a form that shows a secret once answers a resend with nothing new issued."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.operator_support import set_webhook, webhook_receiver
from tests.panel.test_progress_webhook_releases_keys_http import SPRING

pytestmark = pytest.mark.slow


def _sign_in(page: Any, world: PanelWorld, key: str) -> None:
    lang = Language("en")
    page.goto(world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.wait_for_load_state()


def test_a_reload_after_a_test_delivery_sends_nothing_again(
    loopback_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    page = new_page("en-GB")
    _sign_in(page, loopback_world, loopback_world.panel_key)
    with webhook_receiver(204, now=SPRING) as receiver:
        set_webhook(loopback_world, receiver.url)
        page.goto(loopback_world.url + "webhook")
        page.get_by_role("button", name=lang.gettext("Send a test delivery")).click()
        page.locator("#test-result").wait_for()
        assert len(receiver.received) == 1
        page.reload()
        page.locator("#test-result").wait_for()
        assert "The test arrived" in page.locator("#test-result").inner_text()
        assert len(receiver.received) == 1, "the reload sent the test delivery again"
    with psycopg.connect(loopback_world.server.database_url) as conn:
        tested = conn.execute("SELECT count(*) FROM events WHERE kind = 'webhook.tested'")
        assert tested.fetchone() == (1,)


def test_a_reload_after_issuing_a_key_issues_no_second_key(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    page = new_page("en-GB")
    _sign_in(page, panel_world, panel_world.server.create_operator_key())
    page.goto(panel_world.url + "operator/credentials")
    page.locator("#name").fill("night shift")
    page.get_by_role("button", name=lang.gettext("Issue the key")).click()
    shown = page.locator("#new-secret code").inner_text()
    assert shown.startswith("nwo_")
    page.reload()
    page.wait_for_load_state()
    with psycopg.connect(panel_world.server.database_url) as conn:
        named = conn.execute("SELECT count(*) FROM credentials WHERE name = 'night shift'")
        assert named.fetchone() == (1,), "the reload issued a second key"
    assert shown not in page.content()
    page.locator("#sent-again").wait_for()
    check_accessibility(page)
    # The key shown first is the one that works: nothing replaced it.
    with psycopg.connect(panel_world.server.database_url) as conn:
        live = conn.execute(
            "SELECT count(*) FROM credentials WHERE name = 'night shift' AND revoked_at IS NULL"
        )
        assert live.fetchone() == (1,)
    other = new_page("en-GB")
    _sign_in(other, panel_world, shown)
    other.get_by_role("heading", name=lang.gettext("Operations")).wait_for()


def test_a_reload_after_an_invitation_makes_no_second_link(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("en")
    page = new_page("en-GB")
    _sign_in(page, panel_world, panel_world.panel_key)
    page.goto(panel_world.url + "people")
    page.locator("#name").fill("Ana")
    page.locator("#email").fill("ana@acme.example")
    page.get_by_role("button", name=lang.gettext("Make the invitation")).click()
    link = page.locator("#invitation-link code").inner_text()
    with psycopg.connect(panel_world.server.database_url) as conn:
        before = conn.execute("SELECT row_to_json(p)::text FROM people p").fetchall()
    page.reload()
    page.locator("#sent-again").wait_for()
    assert link not in page.content()
    with psycopg.connect(panel_world.server.database_url) as conn:
        after = conn.execute("SELECT row_to_json(p)::text FROM people p").fetchall()
    assert after == before and len(after) == 1
    # The link shown first still opens the page that sets a password.
    other = new_page("en-GB")
    opened = other.goto(link)
    assert opened is not None and opened.status == 200
