"""The operators' settings read a number as the panel's fields do: ASCII digits only. What
Python's `int` alone would also read (`1_0`, a sign, another script's digits) is refused at its
field, and the settings stay as they were."""

from __future__ import annotations

import html
import re

import httpx
import psycopg
import pytest

from control_plane.panel.i18n import LANGUAGES, Language
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def _settings(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        return conn.execute("SELECT * FROM platform_settings").fetchall()


@pytest.mark.parametrize("typed", ["1_0", "+5", "-0", "\u0663", "\u0968", "\uff15", "5.0"])
def test_a_number_not_written_in_ascii_digits_is_refused(
    panel_world: PanelWorld, typed: str
) -> None:
    with sign_in_client(panel_world, panel_world.server.create_operator_key()) as client:
        page = client.get("/panel/operator")
        before = _settings(panel_world)
        answer = client.post(
            "/panel/operator/settings",
            data={
                "csrf": csrf_of(page.text),
                "timezone": "Europe/Amsterdam",
                "catch_up_minutes": "15",
                "org_cap": typed,
                "global_cap": "25",
            },
        )
        assert answer.status_code == 422, answer.headers.get("location")
        assert 'id="org_cap-error"' in answer.text
    assert _settings(panel_world) == before


def _post(client: httpx.Client, token: str, **fields: str) -> httpx.Response:
    sent = {
        "csrf": token,
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": "15",
        "org_cap": "5",
        "global_cap": "25",
        **fields,
    }
    return client.post("/panel/operator/settings", data=sent)


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_refused_setting_names_its_value_and_what_is_expected(
    panel_world: PanelWorld, code: str
) -> None:
    lang = Language(code)
    cases = [
        (
            "timezone",
            "Europe/Amsterdm",
            lang.gettext(
                "%(field)s: “%(value)s” is not a time zone we know. Give its IANA name, such as"
                " Europe/Amsterdam.",
                field=lang.gettext("Time zone of every schedule"),
                value="Europe/Amsterdm",
            ),
        ),
        (
            "catch_up_minutes",
            "121",
            lang.gettext(
                "%(field)s: “%(value)s” is not accepted. Give a whole number from %(low)s to"
                " %(high)s.",
                field=lang.gettext("Catch-up window (minutes)"),
                value="121",
                low=lang.number(2),
                high=lang.number(120),
            ),
        ),
        (
            "org_cap",
            "1_0",
            lang.gettext(
                "%(field)s: “%(value)s” is not accepted. Give a whole number from %(low)s to"
                " %(high)s.",
                field=lang.gettext("Updates per organisation per minute"),
                value="1_0",
                low=lang.number(1),
                high=lang.number(2**31 - 1),
            ),
        ),
        (
            "org_cap",
            "30",
            lang.gettext(
                "%(field)s: “%(value)s” is more than the updates in total per minute (%(total)s).",
                field=lang.gettext("Updates per organisation per minute"),
                value="30",
                total=lang.number(25),
            ),
        ),
    ]
    with sign_in_client(
        panel_world,
        panel_world.server.create_operator_key(),
        headers={"Accept-Language": code},
    ) as client:
        token = csrf_of(client.get("/panel/operator").text)
        before = _settings(panel_world)
        for field, typed, expected in cases:
            answer = _post(client, token, **{field: typed})
            assert answer.status_code == 422
            said = re.findall(rf'id="{field}-error">([^<]*)<', answer.text)
            assert [html.unescape(text) for text in said] == [expected], (field, typed)
            # The field keeps what was typed, to be corrected rather than typed again.
            shown = re.search(rf'id="{field}" name="{field}" value="([^"]*)"', answer.text)
            assert shown is not None and html.unescape(shown.group(1)) == typed
    assert _settings(panel_world) == before
