"""An editor manages a person in a real browser, in Dutch, each page checked with axe-core: makes
them an editor, makes a new invitation link, is refused demoting the organisation's last editor,
and issues a password reset link."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import Language
from tests.panel.conftest import PanelWorld, check_accessibility
from tests.panel.people_support import set_password

pytestmark = pytest.mark.slow


def test_role_new_link_last_editor_and_reset_in_dutch(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language("nl")
    editor = new_page("nl-NL")
    editor.goto(panel_world.url)
    editor.get_by_label(lang.gettext("Your panel key or operator key")).fill(panel_world.panel_key)
    editor.get_by_role("button", name=lang.gettext("Sign in")).click()
    editor.get_by_role("link", name=lang.gettext("People")).click()
    editor.get_by_label(lang.gettext("Name"), exact=True).fill("Anna de Vries")
    editor.get_by_label(
        lang.gettext("E-mail address (they sign in with it; no mail is sent)")
    ).fill("anna@example.com")
    editor.get_by_role("button", name=lang.gettext("Make the invitation")).click()
    first_link = editor.locator("#invitation-link").inner_text().strip()

    editor.get_by_role("button", name=lang.gettext("Make an editor")).click()
    editor.get_by_text(
        lang.gettext("The role is changed: it applies from the person's next page on.")
    ).wait_for()
    assert lang.gettext("editor") in editor.locator("table").inner_text()
    check_accessibility(editor)

    editor.get_by_role("button", name=lang.gettext("Make a new invitation link")).click()
    link = editor.locator("#invitation-link").inner_text().strip()
    assert link != first_link and "/panel/invitation/" in link
    check_accessibility(editor)

    editor.get_by_role("button", name=lang.gettext("Make a viewer")).click()
    editor.get_by_role("alert").get_by_text(
        lang.gettext(
            "The organisation's last editor cannot be made a viewer or removed. Make another "
            "person an editor first."
        )
    ).wait_for()
    check_accessibility(editor)

    with panel_world.client() as anna:
        assert set_password(anna, link).status_code == 303
    editor.goto(panel_world.url + "people")
    editor.get_by_role("button", name=lang.gettext("Reset the password")).click()
    reset = editor.locator("#invitation-link").inner_text().strip()
    assert "/panel/reset/" in reset
    editor.get_by_text(
        lang.gettext(
            "The password reset link. It is shown only now and works once, for %(days)s days: "
            "send it to the person yourself. Their sessions have ended and their old password "
            "no longer works; their authenticator app stays as it was.",
            days=lang.number(7),
        )
    ).wait_for()
    check_accessibility(editor)

    anna_page = new_page("nl-NL")
    anna_page.goto(reset)
    anna_page.get_by_role("heading", name=lang.gettext("Set your password")).wait_for()
    check_accessibility(anna_page)
