"""Named people in a real browser, in four languages, checked with axe-core: an editor invites a
person, the person sets a password through the link (which then works no more), sets up TOTP at
the first sign-in, signs in, changes a schedule, and the agent's timeline names them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.people_support import PASSWORD, current_code

pytestmark = pytest.mark.slow

LOCALES = {"en": "en-GB", "nl": "nl-NL", "de": "de-DE", "pl": "pl-PL"}


@pytest.mark.parametrize("code", list(LOCALES))
def test_invitation_password_code_change_and_the_trail(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    editor = new_page(LOCALES[code])
    editor.goto(panel_world.url)
    editor.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    editor.get_by_role("button", name=lang.gettext("Sign in")).click()
    editor.get_by_role("link", name=lang.gettext("People")).click()
    editor.get_by_role("heading", name=lang.gettext("People"), level=1).wait_for()
    check_accessibility(editor)
    editor.get_by_label(lang.gettext("Name"), exact=True).fill("Anna de Vries")
    editor.get_by_label(
        lang.gettext("E-mail address (they sign in with it; no mail is sent)")
    ).fill("anna@example.com")
    editor.get_by_label(lang.gettext("Role")).select_option("editor")
    editor.get_by_role("button", name=lang.gettext("Make the invitation")).click()
    link = editor.locator("#invitation-link").inner_text().strip()
    assert "/panel/invitation/" in link
    assert lang.gettext("invited") in editor.locator("table").inner_text()
    check_accessibility(editor)

    anna = new_page(LOCALES[code])
    anna.goto(link)
    anna.get_by_role("heading", name=lang.gettext("Set your password")).wait_for()
    check_accessibility(anna)
    anna.get_by_label(
        lang.gettext("Password (at least %(min)s characters)", min=lang.number(12))
    ).fill(PASSWORD)
    anna.get_by_label(lang.gettext("The same password again")).fill(PASSWORD)
    anna.get_by_role("button", name=lang.gettext("Set the password")).click()
    anna.get_by_text(
        lang.gettext(
            "Your password is set. Sign in with your e-mail address and password; you then "
            "set up your authenticator app."
        )
    ).wait_for()
    check_accessibility(anna)

    anna.get_by_label(lang.gettext("E-mail address"), exact=True).fill("anna@example.com")
    anna.get_by_label(lang.gettext("Password"), exact=True).fill(PASSWORD)
    anna.get_by_role("button", name=lang.gettext("Next")).click()
    secret = anna.locator("#totp-secret").inner_text().strip()
    assert (
        anna.locator("#totp-uri").get_attribute("href", timeout=5000).startswith("otpauth://totp/")
    )
    check_accessibility(anna)
    anna.get_by_label(lang.gettext("The six-digit code your authenticator app shows")).fill(
        current_code(secret)
    )
    anna.get_by_role("button", name=lang.gettext("Sign in")).click()
    anna.get_by_role("heading", name=lang.gettext("Agents")).wait_for()

    anna.get_by_role("link", name="web-01").click()
    anna.get_by_label(lang.gettext("Time %(number)s", number=1), exact=True).fill("02:30")
    anna.get_by_role("button", name=lang.gettext("Save the schedule")).click()
    anna.get_by_text(lang.gettext("The schedule is saved.")).wait_for()
    anna.reload()
    timeline = anna.locator(".timeline").inner_text()
    assert lang.gettext("%(who)s changed the update schedule.", who="Anna de Vries") in timeline
    check_accessibility(anna)

    # The link worked once: opened again, it says so.
    again = new_page(LOCALES[code])
    again.goto(link)
    again.get_by_role("heading", name=lang.gettext("This invitation cannot be used")).wait_for()
    check_accessibility(again)
