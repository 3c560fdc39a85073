"""A held agent's "Next update slot" is the first slot its hold lets run, not one the hold skips;
on the night the clocks go forward too."""

from __future__ import annotations

import html
import re
from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo

import pytest

from control_plane.agents.schedule import Schedule
from control_plane.panel.customer_backend import slot_after_hold
from control_plane.settings.services import PlatformSettings
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

AMSTERDAM = ZoneInfo("Europe/Amsterdam")


def _next_slot(page: str) -> str:
    inner = page.split('id="next-slot"', 1)[1].split(">", 1)[1].split("</dd>", 1)[0]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", inner)).split())


@pytest.mark.parametrize(
    ("until", "shown"),
    [
        # The clock shows Friday 26 March 2027; the night into Sunday 28 March skips 02:00-03:00.
        ("2027-03-28", "Sun, March 28, 3:00 AM CEST (when the hold ends)"),
        ("2027-04-02", "Fri, April 2, 3:00 AM CEST (when the hold ends)"),
    ],
)
def test_a_held_agents_next_slot_is_after_the_hold(
    panel_world: PanelWorld, until: str, shown: str
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        agent = f"/panel/agents/{panel_world.agent_id}"
        assert _next_slot(client.get(agent).text) == "Sat, March 27, 3:00 AM CET"
        page = client.get(agent)
        held = client.post(
            agent + "/hold", data={"csrf": csrf_of(page.text), "until": until, "reason": "audit"}
        )
        assert held.status_code == 303
        assert _next_slot(client.get(agent).text) == shown
        page = client.get(agent)
        client.post(agent + "/hold/end", data={"csrf": csrf_of(page.text)})
        assert _next_slot(client.get(agent).text) == "Sat, March 27, 3:00 AM CET"


@pytest.mark.parametrize(
    ("times", "until", "expected"),
    [
        # A slot at the moment the hold ends runs (the hold holds while `until > now`).
        (("00:00",), date(2027, 3, 28), datetime(2027, 3, 28, 0, 0, tzinfo=AMSTERDAM)),
        # 02:30 does not exist on 28 March 2027: the slot runs at 03:30 CEST (01:30 UTC), the
        # planner's rule for a skipped time.
        (("02:30",), date(2027, 3, 28), datetime(2027, 3, 28, 1, 30, tzinfo=UTC)),
        # 02:30 happens twice on 31 October 2027: the first one is the slot.
        (("02:30",), date(2027, 10, 31), datetime(2027, 10, 31, 0, 30, tzinfo=UTC)),
    ],
)
def test_the_slot_after_a_hold_on_the_days_the_clocks_change(
    times: tuple[str, ...], until: date, expected: datetime
) -> None:
    ends = datetime.combine(until, time(0, 0), tzinfo=AMSTERDAM)
    schedule = Schedule(enabled=True, times=times)
    slot = slot_after_hold(schedule, ends, PlatformSettings(timezone="Europe/Amsterdam"))
    assert slot is not None
    assert slot.at == expected


def _listed_slot(page: str) -> str:
    """The one listed agent's "Next update slot" cell."""
    inner = page.split('data-label="Next update slot">', 1)[1].split("</td>", 1)[0]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", inner)).split())


def test_the_lists_say_the_same_slot(panel_world: PanelWorld) -> None:
    """The customer's list and the operator's organisation page show the agent page's slot."""
    agent = f"/panel/agents/{panel_world.agent_id}"
    org = f"/panel/operator/orgs/{panel_world.org_id}"
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        assert _listed_slot(client.get("/panel/agents").text) == "Sat, March 27, 3:00 AM CET"
        page = client.get(agent)
        held = client.post(
            agent + "/hold",
            data={"csrf": csrf_of(page.text), "until": "2027-03-28", "reason": "audit"},
        )
        assert held.status_code == 303
        listed = _listed_slot(client.get("/panel/agents").text)
    assert listed == "Sun, March 28, 3:00 AM CEST (when the hold ends)"
    with sign_in_client(panel_world, key) as client:
        assert _listed_slot(client.get(org).text) == listed


def _due_rows(page: str) -> list[tuple[str, str]]:
    """The operator's organisation page: its coming update slots and how many agents each."""
    table = page.split('id="org-due"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<th scope=\"row\">(.*?)</th>\s*<td[^>]*>(.*?)</td>", table, re.S)
    return [(" ".join(html.unescape(slot).split()), count.strip()) for slot, count in rows]


def test_the_organisations_coming_slots_count_a_held_agent_after_its_hold(
    panel_world: PanelWorld,
) -> None:
    agent = f"/panel/agents/{panel_world.agent_id}"
    org = f"/panel/operator/orgs/{panel_world.org_id}"
    key = panel_world.server.create_operator_key()
    with sign_in_client(panel_world, key) as operator:
        before = _due_rows(operator.get(org).text)
        assert ("Sat, March 27, 3:00 AM CET", "1") in before
        with sign_in_client(panel_world, panel_world.panel_key) as client:
            page = client.get(agent)
            held = client.post(
                agent + "/hold",
                data={"csrf": csrf_of(page.text), "until": "2027-03-28", "reason": "audit"},
            )
            assert held.status_code == 303
        after = _due_rows(operator.get(org).text)
    # The held agent moved to the slot its hold lets run; every other count is as it was.
    assert ("Sun, March 28, 3:00 AM CEST", "1") in after
    moved = dict(before)
    moved.pop("Sat, March 27, 3:00 AM CET")
    moved["Sun, March 28, 3:00 AM CEST"] = "1"
    assert dict(after) == moved
