"""A customer's history at a year's length (200 agents, a run and its event every night for 365
nights: 73,000 of each), read the way a hurried customer and a script would: the newest page,
one deep in the year, the end, a year's range, an export of the longest range and of a year,
and positions nobody wrote. Each answers at once, or at its field; nothing changes."""

from __future__ import annotations

import re
import time
from uuid import UUID

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, sign_in_client
from tests.panel.history_world import LAST_NIGHT
from tests.worlds.rows import rows_at

AGENTS = 200
NIGHTS = 365
# Generous on a shared machine: a page read through its index takes milliseconds.
PAGE_SECONDS = 5


@pytest.fixture
def year(panel_world: PanelWorld) -> PanelWorld:
    names = [f"year-{i:03d}" for i in range(AGENTS)]
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO agents (org_id, name, created_at)"
            " SELECT %s, name, %s - interval '400 days' FROM unnest(%s::text[]) AS name",
            [UUID(panel_world.org_id), LAST_NIGHT, names],
        )
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
            " created_at, finished_at)"
            " SELECT a.id, a.org_id, 'schedule', to_char(at, 'YYYY-MM-DD\"T\"HH24:MI'), at,"
            " 'succeeded', '2.4.1', at, at + interval '5 minutes'"
            " FROM agents a, (SELECT %s - make_interval(days => n) AS at"
            "                 FROM generate_series(0, %s - 1) AS n) AS night"
            " WHERE a.name LIKE 'year-%%'",
            [LAST_NIGHT, NIGHTS],
        )
        conn.execute(
            "INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)"
            " SELECT r.org_id, r.agent_id, r.id, 'update.succeeded', 'schedule',"
            " r.created_at + interval '5 minutes', jsonb_build_object('version', r.version)"
            " FROM runs r JOIN agents a ON a.id = r.agent_id WHERE a.name LIKE 'year-%%'"
        )
        conn.execute("ANALYZE runs")
        conn.execute("ANALYZE events")
    return panel_world


_ITEMS = re.compile(r'<li class="run-|<li><time ')
_OLDER = re.compile(r'href="/panel/history/([^"]+)" rel="next"')


def _timed_get(client: httpx.Client, address: str) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = client.get(address)
    return answer, time.monotonic() - started


def _state(world: PanelWorld) -> tuple[object, ...]:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events),"
            " (SELECT count(*) FROM agents), (SELECT max(id) FROM events)"
        ).fetchone()
    assert row is not None
    return tuple(row)


def test_a_years_history_reads_at_once_and_changes_nothing(year: PanelWorld) -> None:
    with sign_in_client(year, year.panel_key) as client:
        client.get("/panel/history/runs")  # the session's first read marks it used
        before = _state(year)
        for what in ("runs", "events"):
            newest, took = _timed_get(client, f"/panel/history/{what}")
            assert newest.status_code == 200 and took < PAGE_SECONDS, (what, took)
            assert len(_ITEMS.findall(newest.text)) == 50
            older = _OLDER.search(newest.text)
            assert older is not None
            # A page deep in the year: a position half a year back, as the links write it.
            micros, _, key = older.group(1).split("before=", 1)[1].partition(".")
            half = int(micros) - 182 * 86_400 * 10**6
            deep, took = _timed_get(client, f"/panel/history/{what}?before={half}.{key}")
            assert deep.status_code == 200 and took < PAGE_SECONDS, (what, took)
            assert len(_ITEMS.findall(deep.text)) == 50
            # Beyond the year's oldest row: an empty page, the end said, no error.
            end = -400 * 86_400 * 10**6 + int(micros)
            past, took = _timed_get(client, f"/panel/history/{what}?before={end}.{key}")
            assert past.status_code == 200 and took < PAGE_SECONDS
            assert _ITEMS.findall(past.text) == [] and _OLDER.search(past.text) is None
            # A year's range, and one agent's year.
            ranged, took = _timed_get(
                client, f"/panel/history/{what}?from=2026-03-27&to=2027-03-26"
            )
            assert ranged.status_code == 200 and took < PAGE_SECONDS
            assert len(_ITEMS.findall(ranged.text)) == 50
        assert _state(year) == before


def test_an_export_of_the_longest_range_holds_every_run_and_a_year_is_refused(
    year: PanelWorld,
) -> None:
    with sign_in_client(year, year.panel_key) as client:
        client.get("/panel/history/runs")
        before = rows_at(year.server.database_url, ("agents", "panel_sent_forms"))
        counted = _state(year)
        # 92 days, 2026-12-25 to 2027-03-26: each of the 200 agents' run of each of those nights.
        longest, took = _timed_get(client, "/panel/history/runs.csv?from=2026-12-25&to=2027-03-26")
        assert longest.status_code == 200, longest.text[:300]
        assert longest.text.count("\r\n") == 1 + 92 * AGENTS
        assert took < 60
        whole = client.get("/panel/history/events.csv?from=2026-03-27&to=2027-03-26")
        assert whole.status_code == 400
        assert whole.headers["content-type"].startswith("text/html")
        assert "First day “2026-03-27”, last day “2027-03-26”: 365 days." in whole.text
        assert _state(year) == counted
        assert rows_at(year.server.database_url, ("agents", "panel_sent_forms")) == before


_ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# The last microsecond a datetime holds, 9999-12-31 23:59:59.999999 UTC, and one past it.
_LAST_MICROS = 253_402_300_799_999_999


POSITIONS = [
    (f"0.{_ZERO_UUID}", 200, 400),  # 1970 is a time; an event's id is a number
    ("0.0", 400, 200),
    (f"-1.{_ZERO_UUID}", 400, 400),  # a sign: the links never write one
    ("-1.0", 400, 400),
    (f"{_LAST_MICROS}.{_ZERO_UUID}", 200, 400),
    (f"{_LAST_MICROS}.9999999999999999999", 400, 200),  # past any event's id, still a number
    (f"{_LAST_MICROS}.99999999999999999999", 400, 400),  # longer than any number here
    (f"{_LAST_MICROS + 1}.{_ZERO_UUID}", 400, 400),
    ("9" * 30 + ".1", 400, 400),
    ("-" + "9" * 30 + ".1", 400, 400),
    ("1.1.1", 400, 400),
    ("1e30.1", 400, 400),
    ("%C2%B2.1", 400, 400),
    (".", 400, 400),
    ("%2B1.1", 400, 400),  # a sign `int` reads; a position the links never write
    ("1_0.1", 400, 400),
    ("%D9%A3.1", 400, 400),  # an Arabic-Indic three
    ("1.%2B1", 400, 400),
    ("1.%201", 400, 400),
]


def test_a_position_nobody_wrote_is_said_or_read_as_a_time(year: PanelWorld) -> None:
    with sign_in_client(year, year.panel_key) as client:
        client.get("/panel/history/runs")
        counted = _state(year)
        for position, runs, events in POSITIONS:
            for what, status in (("runs", runs), ("events", events)):
                for name in ("before", "after"):
                    answer, took = _timed_get(client, f"/panel/history/{what}?{name}={position}")
                    where = (position, what, name)
                    assert answer.status_code == status, (where, answer.text[-300:])
                    assert took < PAGE_SECONDS, where
                    if status == 400:
                        assert "This page could not be found; here is the newest." in (
                            answer.text
                        ), where
                        assert len(_ITEMS.findall(answer.text)) == 50, where  # the newest
        assert _state(year) == counted
