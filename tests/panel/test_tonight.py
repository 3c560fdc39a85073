""" "Tonight" is the night a customer means when they open it: the night in progress until the
morning (at 02:30 its 03:00 slot is still to come), the coming one from then on (at 09:00 and at
15:00 nobody means the night they slept through). The page names the night and its day in
words, says when the clocks change that night, and links last night's outcomes."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import date, datetime
from zoneinfo import ZoneInfo

import pytest

from control_plane.panel.tonight import Tonight, tonight
from tests.conftest import RunningControlPlane
from tests.panel.conftest import PanelWorld, sign_in_client

AMSTERDAM = ZoneInfo("Europe/Amsterdam")


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.parametrize(
    ("now", "expected"),
    [
        # Saturday 5 December 2026, no clock change near.
        ("2026-12-05T08:00:00Z", Tonight(date(2026, 12, 6), False, date(2026, 12, 5), None)),
        ("2026-12-05T14:00:00Z", Tonight(date(2026, 12, 6), False, date(2026, 12, 5), None)),
        ("2026-12-05T01:30:00Z", Tonight(date(2026, 12, 5), True, date(2026, 12, 4), None)),
        # The morning ends at 06:00 local: 05:59 is still the night, 06:00 is not.
        ("2026-12-05T04:59:00Z", Tonight(date(2026, 12, 5), True, date(2026, 12, 4), None)),
        ("2026-12-05T05:00:00Z", Tonight(date(2026, 12, 6), False, date(2026, 12, 5), None)),
        # Sunday 25 October 2026: the clocks go back at 03:00 CEST to 02:00 CET.
        ("2026-10-24T07:00:00Z", Tonight(date(2026, 10, 25), False, date(2026, 10, 24), "back")),
        ("2026-10-24T13:00:00Z", Tonight(date(2026, 10, 25), False, date(2026, 10, 24), "back")),
        # 02:30 happens twice that night: at 02:30 CEST and at 02:30 CET.
        ("2026-10-25T00:30:00Z", Tonight(date(2026, 10, 25), True, date(2026, 10, 24), "back")),
        ("2026-10-25T01:30:00Z", Tonight(date(2026, 10, 25), True, date(2026, 10, 24), "back")),
        ("2026-10-25T08:00:00Z", Tonight(date(2026, 10, 26), False, date(2026, 10, 25), None)),
        ("2026-10-25T14:00:00Z", Tonight(date(2026, 10, 26), False, date(2026, 10, 25), None)),
        # Sunday 28 March 2027: the clocks go forward at 02:00 CET to 03:00 CEST; 02:30 does not
        # exist, so the night's 01:30 CET and 03:30 CEST stand for it.
        ("2027-03-27T08:00:00Z", Tonight(date(2027, 3, 28), False, date(2027, 3, 27), "forward")),
        ("2027-03-27T14:00:00Z", Tonight(date(2027, 3, 28), False, date(2027, 3, 27), "forward")),
        ("2027-03-28T00:30:00Z", Tonight(date(2027, 3, 28), True, date(2027, 3, 27), "forward")),
        ("2027-03-28T01:30:00Z", Tonight(date(2027, 3, 28), True, date(2027, 3, 27), "forward")),
        ("2027-03-28T07:00:00Z", Tonight(date(2027, 3, 29), False, date(2027, 3, 28), None)),
        ("2027-03-28T13:00:00Z", Tonight(date(2027, 3, 29), False, date(2027, 3, 28), None)),
    ],
)
def test_the_night_tonight_is_about(now: str, expected: Tonight) -> None:
    assert tonight(_utc(now), AMSTERDAM) == expected


def _world_at(start: Callable[..., RunningControlPlane], instant: str) -> PanelWorld:
    """A served control plane whose clock shows `instant`, with one agent on the new agents'
    schedule (03:00)."""
    server = start(fake_clock=f"{instant},anchor={time.time()},speed=1")
    org = server.create_org("Acme")
    agent = server.enroll_agent(org["org_id"], "web-01")
    return PanelWorld(
        server=server,
        org_id=org["org_id"],
        panel_key=org["panel_key"],
        agent_id=agent["agent_id"],
        agent_key=agent["agent_key"],
    )


def _text(html: str, element_id: str) -> str:
    """The words of the element with this id, its tags left out and its spaces joined."""
    inner = html.split(f'id="{element_id}"', 1)[1].split(">", 1)[1].split("</p>", 1)[0]
    return " ".join(re.sub(r"<[^>]+>", "", inner).split())


@pytest.mark.parametrize(
    ("now", "night", "slot", "last_night"),
    [
        pytest.param(
            # 09:00 CET on Sunday 25 October 2026, the morning after the clocks went back.
            "2026-10-25T08:00:00Z",
            "The coming night: the update slots of Mon, October 26. Times are in Europe/Amsterdam.",
            "3:00 AM CET",
            ("Last night, Sun, October 25: what happened", "2026-10-25"),
            id="0900_after_the_clocks_went_back",
        ),
        pytest.param(
            # 15:00 CEST on Saturday 24 October 2026: tonight the clocks go back.
            "2026-10-24T13:00:00Z",
            "The coming night: the update slots of Sun, October 25. "
            "Times are in Europe/Amsterdam. "
            "On October 25 the clocks go back; each slot is shown at the time it runs.",
            "3:00 AM CET",
            ("Last night, Sat, October 24: what happened", "2026-10-24"),
            id="1500_before_the_clocks_go_back",
        ),
        pytest.param(
            # 02:30 CEST on Sunday 25 October 2026, the first of that night's two 02:30s.
            "2026-10-25T00:30:00Z",
            "The night in progress: the update slots of Sun, October 25, "
            "those already past included. Times are in Europe/Amsterdam. "
            "On October 25 the clocks go back; each slot is shown at the time it runs.",
            "3:00 AM CET",
            ("Last night, Sat, October 24: what happened", "2026-10-24"),
            id="0230_while_the_clocks_go_back",
        ),
        pytest.param(
            # 09:00 CET on Saturday 27 March 2027: tonight the clocks go forward.
            "2027-03-27T08:00:00Z",
            "The coming night: the update slots of Sun, March 28. "
            "Times are in Europe/Amsterdam. "
            "On March 28 the clocks go forward; each slot is shown at the time it runs.",
            "3:00 AM CEST",
            ("Last night, Sat, March 27: what happened", "2027-03-27"),
            id="0900_before_the_clocks_go_forward",
        ),
    ],
)
def test_tonight_names_the_night_a_customer_means(
    control_plane_server: Callable[..., RunningControlPlane],
    now: str,
    night: str,
    slot: str,
    last_night: tuple[str, str],
) -> None:
    world = _world_at(control_plane_server, now)
    with sign_in_client(world, world.panel_key) as client:
        page = client.get("/panel/forecast")
    assert page.status_code == 200
    assert _text(page.text, "forecast-night") == night
    # The table's one slot: the agent's 03:00 of that night, in the zone's time of that night.
    heads = re.findall(r'<tr><th scope="row">([^<]*)</th>', page.text)
    assert [" ".join(head.split()) for head in heads] == [slot]
    words, day = last_night
    assert _text(page.text, "last-night") == words
    assert f'href="/panel/history/runs?from={day}&amp;to={day}"' in page.text


@pytest.mark.parametrize(
    ("now", "first"),
    [
        # 09:00 CET on Saturday 27 March 2027: the coming night is Sunday's (and the clocks change).
        pytest.param("2027-03-27T08:00:00Z", "March 28", id="0900"),
        # 02:30 CET on Saturday 27 March 2027: the night in progress still has its 03:00 slot.
        pytest.param("2027-03-27T01:30:00Z", "March 27", id="0230"),
    ],
)
def test_the_operators_coming_nights_start_with_tonight(
    control_plane_server: Callable[..., RunningControlPlane], now: str, first: str
) -> None:
    world = _world_at(control_plane_server, now)
    with sign_in_client(world, world.server.create_operator_key()) as client:
        page = client.get("/panel/operator")
    assert page.status_code == 200
    nights = page.text.split('id="night-heading"', 1)[1].split("</section>", 1)[0]
    titles = re.findall(r"<title[^>]*>Agents per slot on ([^<]*)</title>", nights)
    assert titles[0] == first
    assert len(titles) == 3
