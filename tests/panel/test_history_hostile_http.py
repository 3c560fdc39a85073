"""The history's pages opened with hostile addresses, as a customer might paste or a script
send them: every odd value is said at its field in the reader's language (HTTP 400), never
"Something went wrong", and reading a page changes nothing."""

from __future__ import annotations

import html
from urllib.parse import quote

import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, sign_in_client
from tests.worlds.rows import rows_at

_TABLES = ("runs", "events", "agents", "panel_sessions")

# Digits Python's `str.isdigit` takes but `int` refuses (a superscript), digits of another
# script `int` reads (Arabic-Indic seven), and numbers written as `int` alone reads them.
ODD_NIGHTS = ["²", "³⁰", "\u0667", "\u096d", "1_4", "+7", " 7", "7 ", "9" * 5000, "\u0661\u0664"]


def _rows(world: PanelWorld) -> dict[str, list[str]]:
    return rows_at(world.server.database_url, _TABLES)


@pytest.mark.parametrize("code", LANGUAGES)
def test_odd_numbers_of_nights_are_said_at_the_field(panel_world: PanelWorld, code: str) -> None:
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        client.get("/panel/history/versions")  # the session's first read marks it used
        before = _rows(panel_world)
        for nights in ODD_NIGHTS:
            answer = client.get(f"/panel/history/versions?nights={quote(nights)}")
            assert answer.status_code == 400, (nights, answer.text[-400:])
            said = lang.gettext(
                "“%(value)s” is not one of the choices (%(choices)s).",
                value=nights[:20],
                choices="7, 14, 30",
            )
            assert html.escape(said, quote=False) in answer.text.replace("&#34;", '"'), nights
        # The choices themselves are read as they are.
        for nights in ("7", "14", "30"):
            assert client.get(f"/panel/history/versions?nights={nights}").status_code == 200
        assert _rows(panel_world) == before


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_value_with_a_bidirectional_control_is_quoted_seen_not_obeyed(
    panel_world: PanelWorld, code: str
) -> None:
    """A right-to-left override quoted as it came would turn the rest of the sentence around:
    the history's refusals show it, as every refusal does, as U+FFFD."""
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        client.get("/panel/history/versions")
        before = _rows(panel_world)
        cases = [
            (
                "/panel/history/versions?nights=" + quote("\u202e7"),
                lang.gettext(
                    "“%(value)s” is not one of the choices (%(choices)s).",
                    value="\ufffd7",
                    choices="7, 14, 30",
                ),
            ),
            (
                "/panel/history/runs?from=" + quote("2027-03-2\u20666"),
                lang.gettext(
                    "“%(value)s” is not a date (expected YYYY-MM-DD).", value="2027-03-2\ufffd6"
                ),
            ),
            (
                "/panel/history/events?to=" + quote("\u202e2027-03-26"),
                lang.gettext(
                    "“%(value)s” is not a date (expected YYYY-MM-DD).", value="\ufffd2027-03-26"
                ),
            ),
        ]
        for address, said in cases:
            answer = client.get(address)
            assert answer.status_code == 400
            text = html.unescape(answer.text)
            assert said in text, address
            assert "\u202e" not in text and "\u2066" not in text
        assert _rows(panel_world) == before


@pytest.mark.parametrize("code", ["en", "de", "pl"])
def test_a_field_given_twice_with_two_values_is_said_not_guessed(
    panel_world: PanelWorld, code: str
) -> None:
    """`?from=…&from=…` names two ranges: the page says so at the field (400) instead of showing
    one of them, and an export of it makes no file; the same value twice says one thing."""
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        client.get("/panel/history/runs")
        before = _rows(panel_world)
        for what in ("runs", "events", "runs.csv", "events.csv"):
            for name, label, values in (
                ("from", "First day", ("2027-01-01", "2027-03-01")),
                ("to", "Last day", ("2027-03-20", "2027-03-26")),
            ):
                other = "from=2027-03-01" if name == "to" else "to=2027-03-26"
                query = f"{name}={values[0]}&{other}&{name}={values[1]}"
                answer = client.get(f"/panel/history/{what}?{query}")
                assert answer.status_code == 400, (what, query)
                assert answer.headers["content-type"].startswith("text/html")
                said = lang.gettext(
                    "%(field)s: “%(value)s” and “%(other)s”: two values for one field. Give one.",
                    field=lang.gettext(label),
                    value=values[0],
                    other=values[1],
                )
                assert said in html.unescape(answer.text), (what, query)
            same = client.get(
                f"/panel/history/{what}?from=2027-03-01&from=2027-03-01&to=2027-03-26"
            )
            assert same.status_code == 200, what
        assert _rows(panel_world) == before


_TOO_LONG = (
    "First day “%(first)s”, last day “%(last)s”: %(days)s days. An export holds at most"
    " %(count)s day."
)
_TOO_LONG_PLURAL = (
    "First day “%(first)s”, last day “%(last)s”: %(days)s days. An export holds at most"
    " %(count)s days."
)


@pytest.mark.parametrize("code", LANGUAGES)
def test_an_export_too_long_quotes_its_days(panel_world: PanelWorld, code: str) -> None:
    """A range of more days than an export holds is said at the range with its first and last
    day and how many days they make; no file is made, nothing changes."""
    lang = Language(code)
    with sign_in_client(
        panel_world, panel_world.panel_key, headers={"Accept-Language": code}
    ) as client:
        client.get("/panel/history/runs")
        before = _rows(panel_world)
        ranges = (("2026-03-27", "2027-03-26", 365), ("2026-12-24", "2027-03-26", 93))
        for first, last, days in ranges:
            answer = client.get(f"/panel/history/runs.csv?from={first}&to={last}")
            assert answer.status_code == 400
            assert answer.headers["content-type"].startswith("text/html")
            said = lang.ngettext(
                _TOO_LONG,
                _TOO_LONG_PLURAL,
                92,
                first=first,
                last=last,
                days=lang.number(days),
                count=lang.number(92),
            )
            assert said in html.unescape(answer.text)
        assert _rows(panel_world) == before
