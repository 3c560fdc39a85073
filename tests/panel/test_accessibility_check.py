"""The browser tests' accessibility check fails on what it exists to catch: a serious violation on
a real panel page, with axe-core from the context's init script and without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.panel.conftest import PanelWorld, check_accessibility

pytestmark = pytest.mark.slow  # a real browser: dealt out first (tests/conftest.py)

# A button without a name: axe-core's `button-name`, a critical violation.
_NAMELESS_BUTTON = "document.body.insertAdjacentHTML('beforeend', '<button></button>')"


def test_a_panel_page_passes_and_a_nameless_button_fails_it(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    page.goto(panel_world.url)
    assert page.evaluate("typeof axe") == "object"  # from the context's init script
    check_accessibility(page)
    page.evaluate(_NAMELESS_BUTTON)
    with pytest.raises(AssertionError, match="button-name"):
        check_accessibility(page)


def test_without_axe_in_the_page_the_check_brings_it(
    panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    page = new_page()
    page.goto(panel_world.url)
    page.evaluate("delete window.axe")
    page.evaluate(_NAMELESS_BUTTON)
    with pytest.raises(AssertionError, match="button-name"):
        check_accessibility(page)
