"""Every number the panel reads from an address or a form is ASCII digits and nothing else:
a history page's position, the flags a redirect sets (`?saved=1`), a schedule row's remove
button. `int` alone, and the checks that use it, also take a sign, `_`, spaces and other
scripts' digits; each such value is refused as one the panel never writes, and nothing
changes."""

from __future__ import annotations

import html
import re
from urllib.parse import quote, urlencode

import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client
from tests.panel.history_world import add_nights
from tests.worlds.rows import rows_at

_TABLES = ("runs", "events", "agents", "holds", "credentials", "enrollment_tokens")
NEWEST = "This page could not be found; here is the newest."
# Numbers as `int` reads them, but as no address of the panel writes them.
ODD = ["+{n}", " {n}", "{n} ", "{n}_0", "-{n}", "\u0661{n}", "{n}\u0663", "\uff11{n}"]


def _rows(world: PanelWorld) -> dict[str, list[str]]:
    return rows_at(world.server.database_url, _TABLES)


def _older(text: str) -> str:
    found = re.search(r'href="[^"]*[?&]before=([^"&]+)"', html.unescape(text))
    assert found is not None, "no link to older rows"
    return found.group(1)


@pytest.mark.parametrize(
    ("what", "part"),
    # A run's position ends in its UUID, not a number.
    [("runs", "micros"), ("events", "micros"), ("events", "key")],
)
@pytest.mark.parametrize("odd", ODD)
def test_a_position_written_otherwise_than_the_page_writes_it_is_refused(
    panel_world: PanelWorld, what: str, part: str, odd: str
) -> None:
    add_nights(panel_world, panel_world.agent_id, 60)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        newest = client.get(f"/panel/history/{what}")
        micros, _, key = _older(newest.text).partition(".")
        assert client.get(f"/panel/history/{what}?before={micros}.{key}").status_code == 200
        if part == "micros":
            micros = odd.format(n=micros)
        else:
            key = odd.format(n=key)
        before = _rows(panel_world)
        page = client.get(f"/panel/history/{what}?before={quote(micros)}.{quote(key)}")
        assert page.status_code == 400, (micros, key)
        assert NEWEST in page.text
        assert _rows(panel_world) == before


FLAG_PAGES = [
    "/panel/default-schedule?saved={v}",
    "/panel/enrollment?revoked={v}",
    "/panel/agents/{agent}?saved={v}",
    "/panel/agents/{agent}?requested={v}",
]


@pytest.mark.parametrize("address", FLAG_PAGES)
@pytest.mark.parametrize("odd", ["+1", " 1", "1_0", "1.0", "\u0661"])
def test_a_flag_in_an_address_is_digits_only(
    panel_world: PanelWorld, address: str, odd: str
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        url = address.format(agent=panel_world.agent_id, v="{v}")
        assert client.get(url.format(v="1")).status_code == 200
        before = _rows(panel_world)
        answer = client.get(url.format(v=quote(odd)))
        assert answer.status_code == 422, (url, odd, answer.status_code)
        name = url.split("?")[1].split("=")[0]
        said = f"{name}: “{odd}” is not a value this form sends"
        assert said in html.unescape(answer.text), (url, odd)
        assert _rows(panel_world) == before


@pytest.mark.parametrize("odd", ["+1", " 1", "1_0", "\u0661"])
def test_the_sign_in_pages_flags_are_digits_only(panel_world: PanelWorld, odd: str) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        client.cookies.clear()
        for flag in ("signed_out", "ended", "invited", "new_password", "expired"):
            assert client.get(f"/panel/sign-in?{flag}=1").status_code in {200, 401}  # expired
            answer = client.get(f"/panel/sign-in?{flag}={quote(odd)}")
            assert answer.status_code == 422, (flag, odd)


@pytest.mark.parametrize("odd", ["+1", " 0", "0_0", "\u0660", "-0"])
def test_a_schedule_rows_remove_button_is_digits_only(panel_world: PanelWorld, odd: str) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        url = f"/panel/agents/{panel_world.agent_id}/schedule"
        token = csrf_of(client.get(f"/panel/agents/{panel_world.agent_id}").text)
        before = _rows(panel_world)
        fields = [("csrf", token), ("enabled", "1"), ("times", "04:00"), ("times", "05:00")]
        form = {"content-type": "application/x-www-form-urlencoded"}
        sent = urlencode([*fields, ("action", "remove"), ("remove", odd)])
        answer = client.post(url, content=sent, headers=form)
        assert answer.status_code == 422, (odd, answer.status_code)
        assert _rows(panel_world) == before
