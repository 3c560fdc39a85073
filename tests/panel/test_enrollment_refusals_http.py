"""The enrollment form's refusals say the field, the value as typed (its control characters shown,
not obeyed) and what is expected, next to the field, in each of the nine languages; no token is
made and nothing else changes."""

from __future__ import annotations

import html
import re

import pytest

from control_plane.panel.enrollment_routes import _term_problem
from control_plane.panel.i18n import LANGUAGES, Language
from ground.contract.plain_text import shown
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.worlds.rows import rows_at

FORM = {"uses": "1", "hours": "24", "name_pattern": "", "label": ""}
TABLES = ("enrollment_tokens", "panel_sent_forms")

_OUT_OF_RANGE = (
    "%(field)s: “%(value)s” is not accepted. Give a whole number from %(low)s to %(high)s."
)
_CONTROL = "%(field)s: “%(value)s” contains a control character (%(code)s). Write it in plain text."
_TOO_LONG = (
    "%(field)s: “%(value)s” is too long (%(length)s characters). At most %(count)s characters are"
    " accepted."
)


def _expected(lang: Language, field: str, typed: str) -> str:
    """What the page says of `typed` in `field`."""
    label = {
        "uses": "How many hosts may use it",
        "hours": "Valid for how many hours",
        "name_pattern": "Agent names must match",
        "label": "What it is for",
    }[field]
    if field in {"uses", "hours"}:
        return lang.gettext(
            _OUT_OF_RANGE,
            field=lang.gettext(label),
            value=typed.replace("\u202e", "\ufffd"),
            low=lang.number(1),
            high=lang.number(10_000 if field == "uses" else 720),
        )
    if len(typed) > 200:
        return lang.gettext(
            _TOO_LONG,
            field=lang.gettext(label),
            value=typed[:40] + "…",
            length=lang.number(len(typed)),
            count=lang.number(200),
        )
    control = re.search(r"[\x00-\x1f\x7f\u202e]", typed)
    assert control is not None
    return lang.gettext(
        _CONTROL,
        field=lang.gettext(label),
        value=re.sub(r"[\x00-\x1f\x7f\u202e]", "\ufffd", typed),
        code=f"U+{ord(control.group()):04X}",
    )


CASES = [
    ("uses", "0", "uses-error"),
    ("uses", "10001", "uses-error"),
    ("uses", "two", "uses-error"),
    ("uses", "-3", "uses-error"),
    ("uses", "<b>5</b>", "uses-error"),
    ("uses", "\u202e12", "uses-error"),
    ("hours", "0", "hours-error"),
    ("hours", "721", "hours-error"),
    ("hours", "1e3", "hours-error"),
    ("name_pattern", "web\t*", "name_pattern-error"),
    ("name_pattern", "web-\x00*", "name_pattern-error"),
    ("name_pattern", "web-\x7f*", "name_pattern-error"),
    ("name_pattern", "w" * 250, "name_pattern-error"),
    ("label", "rack\n4", "label-error"),
    ("label", "<script>x</script>\x1b", "label-error"),
]


@pytest.mark.parametrize("code", LANGUAGES)
def test_each_refusal_quotes_the_value_typed(panel_world: PanelWorld, code: str) -> None:
    lang = Language(code)
    before = rows_at(panel_world.server.database_url, TABLES)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        token = csrf_of(client.get("/panel/enrollment").text)
        for field, typed, where in CASES:
            answer = client.post("/panel/enrollment", data={**FORM, field: typed, "csrf": token})
            assert answer.status_code == 422, (field, typed)
            said = re.findall(rf'id="{where}">([^<]*)<', answer.text)
            assert [html.unescape(text) for text in said] == [_expected(lang, field, typed)]
            assert "--enrollment-token" not in answer.text
            assert "<script>x" not in answer.text and "<b>5" not in answer.text
    assert rows_at(panel_world.server.database_url, TABLES) == before


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_text_refused_for_another_reason_is_quoted_too(code: str) -> None:
    """A label the rules refuse that is neither too long nor holds a control (a lone surrogate,
    which no browser's form sends) is still said with its field, its value and the rule."""
    lang = Language(code)
    said = _term_problem(lang, "label", {**FORM, "label": "rack \ud800"})
    assert said == lang.gettext(
        "%(field)s: “%(value)s” is not accepted. Write it in plain text of at most %(count)s"
        " characters.",
        field=lang.gettext("What it is for"),
        value=shown("rack \ud800"),
        count=lang.number(200),
    )
