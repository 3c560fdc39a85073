"""In a real browser, in Dutch, German and Polish (and English): the keys the control plane named
itself — an organisation's first panel key, an operator key made without a name — are named in
the reader's language on the operators' key list, its buttons and the revoke page; a name an
operator gave is shown as written."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.accounts.services import FIRST_PANEL_KEY, UNNAMED_OPERATOR_KEY
from control_plane.panel.i18n import Language
from control_plane.panel.wording import key_name
from tests.panel.conftest import PanelWorld
from tests.panel.test_browser_languages import BROWSER_LOCALES

# A real browser through two screens, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

GIVEN_NAME = "Bram (night shift)"


@pytest.mark.parametrize("code", ["nl", "de", "pl", "en"])
def test_generated_key_names_in_the_readers_language(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    lang = Language(code)
    server = panel_world.server
    server.admin("create-operator-key", "--name", GIVEN_NAME)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(panel_world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(
        server.create_operator_key()
    )
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.get_by_role("link", name=lang.gettext("Credentials")).click()

    first = key_name(lang, FIRST_PANEL_KEY)
    names = page.locator("table.credentials tbody th[scope=row]").all_inner_texts()
    assert first in names
    assert any(name.startswith(key_name(lang, UNNAMED_OPERATOR_KEY)) for name in names)
    assert GIVEN_NAME in names
    if code != "en":
        assert first != FIRST_PANEL_KEY
        assert FIRST_PANEL_KEY not in page.content()

    page.get_by_role("button", name=lang.gettext("Rotate %(name)s", name=first)).click()
    assert page.locator("#new-secret").inner_text().count(first) == 1
    page.get_by_role("link", name=lang.gettext("Revoke %(name)s…", name=first)).click()
    page.get_by_role("heading", name=lang.gettext("Revoke %(name)s?", name=first)).wait_for()
    if code != "en":
        assert FIRST_PANEL_KEY not in page.content()
