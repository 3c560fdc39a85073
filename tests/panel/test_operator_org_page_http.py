"""One organisation's page for the operators at size: its agents per state and per coming slot,
and one page of its agents in the view the URL names — never a row per agent of a large
organisation (the page used to list, and plan the next slot of, every one of them)."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime, timedelta
from uuid import UUID

import psycopg
import pytest

from tests.panel.conftest import PanelWorld, sign_in_client

# The fixtures' fake clock starts here (conftest's SPRING_CLOCK_START): 12:00 in Amsterdam.
NOW = datetime(2027, 3, 26, 11, tzinfo=UTC)
# 120 agents beside the world's own web-01 (03:00, the default): 95 more at 03:00, 20 at 01:00
# and 23:00, 5 with their schedule off; 3 whose last run failed, 2 whose last slot was missed.
FAILED = ["db-000", "db-001", "db-002"]
MISSED = ["db-003", "db-004"]
# Whose host's clock was kept further off than its agent follows (a config poll's `Date`).
CLOCK_OFF = ["db-005"]


def _add_fleet(world: PanelWorld) -> None:
    names = [f"db-{i:03d}" for i in range(120)]
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at, update_schedule_enabled,"
            " update_schedule_times)"
            " SELECT %s, name, now(), n >= 5,"
            ' CASE WHEN n BETWEEN 5 AND 24 THEN \'["01:00", "23:00"]\'::jsonb'
            " ELSE '[\"03:00\"]'::jsonb END"
            " FROM unnest(%s::text[]) WITH ORDINALITY AS t(name, n1)"
            " CROSS JOIN LATERAL (SELECT n1 - 1 AS n) AS i RETURNING id, name",
            [UUID(world.org_id), names],
        ).fetchall()
        ids = {name: agent_id for agent_id, name in rows}
        night = NOW - timedelta(hours=8)
        for names_of, status in ((FAILED, "failed"), (MISSED, "missed")):
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                " created_at, finished_at, miss_reason)"
                " SELECT a, %s, 'schedule', %s, %s, %s, %s, %s,"
                " CASE WHEN %s = 'missed' THEN 'offline' END FROM unnest(%s::uuid[]) AS a",
                [
                    UUID(world.org_id),
                    night.strftime("%Y-%m-%dT%H:%M"),
                    night,
                    status,
                    night,
                    night,
                    status,
                    [ids[name] for name in names_of],
                ],
            )
        conn.execute(
            "INSERT INTO agent_clocks (agent_id, offset_seconds, measured_at)"
            " SELECT a, -266400, %s FROM unnest(%s::uuid[]) AS a",
            [NOW - timedelta(hours=1), [ids[name] for name in CLOCK_OFF]],
        )


@pytest.fixture
def org_fleet(panel_world: PanelWorld) -> PanelWorld:
    _add_fleet(panel_world)
    return panel_world


def _listed(html: str) -> list[str]:
    table = html.split('id="org-agents"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<th scope="row"><a href="[^"]+/agents/[0-9a-f-]+">([^<]*)</a>', table)


def _rows(html: str, table_id: str) -> list[tuple[str, str]]:
    table = html.split(f'id="{table_id}"', 1)[1].split("</table>", 1)[0]
    found = re.findall(r"<tr>\s*<th scope=\"row\">(.*?)</th>\s*<td[^>]*>([^<]*)</td>", table, re.S)
    return [(re.sub(r"<[^>]+>", "", head).strip(), count) for head, count in found]


def test_a_large_organisation_is_shown_a_page_at_a_time(org_fleet: PanelWorld) -> None:
    key = org_fleet.server.create_operator_key()
    url = f"/panel/operator/orgs/{org_fleet.org_id}"
    with sign_in_client(org_fleet, key) as client:
        first = client.get(url)
        third = client.get(url, params={"page": "3"})
        past = client.get(url, params={"page": "9"})
    assert first.status_code == 200
    assert "121 agents" in first.text and "Page 1 of 3" in first.text
    names = _listed(first.text)
    assert len(names) == 50 and names == sorted(names)
    assert f'href="{url}?page=2"' in first.text
    assert len(_listed(third.text)) == 21
    # A page past the end is an error at its field, naming the last page.
    assert past.status_code == 400
    assert "Page: “9” is not accepted. Give a whole number from 1 to 3." in past.text


def test_the_summary_counts_each_state_as_its_view_finds_it(org_fleet: PanelWorld) -> None:
    key = org_fleet.server.create_operator_key()
    url = f"/panel/operator/orgs/{org_fleet.org_id}"
    with sign_in_client(org_fleet, key) as client:
        page = client.get(url).text
        states = _rows(page, "org-states")
        assert ("Failed or rolled back at its last run", "3") in states
        assert ("Missed at its last slot", "2") in states
        assert ("Host's clock wrong: its updates are missed", "1") in states
        failed = client.get(url, params={"state": "failed"}).text
        assert f'href="{url}?state=failed"' in page
        assert sorted(_listed(failed)) == FAILED
        clock = client.get(url, params={"state": "clock"}).text
        assert _listed(clock) == CLOCK_OFF
        assert "host's clock 3 days 2 hours behind" in html.unescape(clock)
        # Every state's count is what its view of the list finds.
        select = page.split('id="state"', 1)[1].split("</select>", 1)[0]
        labels = re.findall(r'<option value="([a-z]+)"[^>]*>([^<]+)</option>', select)
        assert len(labels) == 7
        for state, label in labels:
            found = client.get(url, params={"state": state}).text
            count = dict(states)[label]
            if count == "0":
                assert "No agent matches this view." in found
            else:
                assert re.search(rf"\b{count} agents?\b · Page 1 of", found), state


def test_the_next_slots_say_how_many_agents_each(org_fleet: PanelWorld) -> None:
    key = org_fleet.server.create_operator_key()
    with sign_in_client(org_fleet, key) as client:
        page = client.get(f"/panel/operator/orgs/{org_fleet.org_id}").text
    # Tonight's 23:00 comes first, then 03:00 (web-01 and 95 more); five are off.
    assert _rows(page, "org-due") == [
        # Babel writes a narrow no-break space before AM and PM.
        ("Fri, March 26, 11:00\u202fPM CET", "20"),
        ("Sat, March 27, 3:00\u202fAM CET", "96"),
        ("off", "5"),
    ]


def test_an_organisation_that_does_not_exist_is_not_found(org_fleet: PanelWorld) -> None:
    key = org_fleet.server.create_operator_key()
    with sign_in_client(org_fleet, key) as client:
        missing = client.get(f"/panel/operator/orgs/{UUID(int=7)}")
    assert missing.status_code == 404
