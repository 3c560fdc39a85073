"""In a real browser, in each of the nine languages: no two texts of a picture overlap — legends,
the columns' labels and the axis numbers — on the customer's forecast and on the operators' page
(three nights, last night's grants, outcomes and misses, the fleet by version), with a busy
organisation's data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.busy_world import busy_world
from tests.panel.conftest import PanelWorld
from tests.panel.test_browser_languages import BROWSER_LOCALES

# A real browser through two screens per language, started first (tests/conftest.py).
pytestmark = pytest.mark.slow

# Every pair of texts in one picture whose boxes overlap, by their words; and how many texts
# each picture has, so a picture drawn without its texts is not taken for a good one.
OVERLAPPING_TEXTS = """() => Array.from(document.querySelectorAll('svg.chart')).map((svg) => {
    const boxes = Array.from(svg.querySelectorAll('text')).map((text) => ({
        words: text.textContent,
        box: text.getBoundingClientRect(),
    }));
    const overlapping = [];
    for (let i = 0; i < boxes.length; i++) {
        for (let j = i + 1; j < boxes.length; j++) {
            const a = boxes[i].box, b = boxes[j].box;
            if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) {
                overlapping.push([boxes[i].words, boxes[j].words]);
            }
        }
    }
    const frame = svg.getBoundingClientRect();
    const outside = boxes.filter(({box}) => box.left < frame.left - 0.5
        || box.right > frame.right + 0.5 || box.bottom > frame.bottom + 0.5
        || box.top < frame.top - 0.5).map(({words}) => words);
    return {title: svg.getAttribute('aria-label'), texts: boxes.length, overlapping, outside};
})"""


def _pictures(page: Any, least: int) -> None:
    page.wait_for_load_state()
    pictures = page.evaluate(OVERLAPPING_TEXTS)
    assert len(pictures) >= least, page.url
    for picture in pictures:
        assert picture["texts"] >= 2, picture
        assert picture["overlapping"] == [], picture
        assert picture["outside"] == [], picture


def _signed_in(new_page: Callable[..., Any], world: PanelWorld, code: str, key: str) -> Any:
    lang = Language(code)
    page = new_page(BROWSER_LOCALES[code])
    page.goto(world.url)
    page.get_by_label(lang.gettext("Your panel key or operator key")).fill(key)
    page.get_by_role("button", name=lang.gettext("Sign in")).click()
    page.wait_for_url("**/panel/*")
    return page


@pytest.mark.parametrize("code", LANGUAGES)
def test_no_two_texts_of_a_picture_overlap(
    code: str, panel_world: PanelWorld, new_page: Callable[..., Any]
) -> None:
    busy = busy_world(panel_world)
    customer = _signed_in(new_page, panel_world, code, panel_world.panel_key)
    customer.goto(panel_world.url + "forecast")
    _pictures(customer, least=1)

    operator = _signed_in(new_page, panel_world, code, busy.operator_key)
    operator.goto(panel_world.url + "operator")
    # Three nights, last night's grants, outcomes and misses, the fleet by version.
    _pictures(operator, least=7)
