"""`nachtwacht control events` as an engineer on call reads it: a window of the night
(`--since`, `--until`), page after page (`--before-id`, named by the last line of a full page),
each line with its event id. Real processes against a real database."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from control_plane.events.trail import record_event
from tests.control_plane.test_cli import run_control

pytestmark = pytest.mark.slow

NIGHT = datetime(2026, 11, 30, 1, 50, tzinfo=UTC)


def _night_of_events(database_url: str) -> list[int]:
    """Ten events a minute apart from 01:50Z, oldest first; their ids."""
    with psycopg.connect(database_url, row_factory=dict_row, autocommit=True) as conn:
        for minute in range(10):
            record_event(
                conn,
                org_id=None,
                agent_id=None,
                run_id=None,
                kind="brake.engaged",
                actor_kind="operator",
                actor_name=f"minute {minute}",
                at=NIGHT + timedelta(minutes=minute),
            )
        rows = conn.execute("SELECT id FROM events ORDER BY id").fetchall()
    return [row["id"] for row in rows]


def _events(database_url: str, *flags: str) -> tuple[int, str, str]:
    result = run_control("events", *flags, "--database-url", database_url)
    return result.returncode, result.stdout, result.stderr


def test_a_window_of_the_night_is_read_page_by_page(database_url: str) -> None:
    ids = _night_of_events(database_url)
    window = ("--since", "2026-11-30T01:52:00Z", "--until", "2026-11-30T01:58:00Z")
    code, first, err = _events(database_url, *window, "--limit", "4")
    assert code == 0, err
    lines = first.splitlines()
    # Newest first, 01:57 to 01:54; the last line names the next page.
    assert [line.split()[1] for line in lines[:4]] == [f"#{i}" for i in ids[7:3:-1]]
    assert lines[4] == f"(more: the same command with --before-id {ids[4]})"
    code, second, err = _events(database_url, *window, "--limit", "4", "--before-id", str(ids[4]))
    assert code == 0, err
    assert [line.split()[1] for line in second.splitlines()] == [f"#{ids[3]}", f"#{ids[2]}"]

    code, as_json, err = _events(database_url, *window, "--limit", "4", "--json")
    assert code == 0, err
    page = json.loads(as_json)
    assert [event["id"] for event in page["events"]] == ids[7:3:-1]
    assert page["next_before_id"] == ids[4]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        pytest.param(
            ("--since", "yesterday"),
            "--since: 'yesterday' is not an RFC 3339 instant (expected e.g. 2026-11-30T02:00:00Z)",
            id="since_a_word",
        ),
        pytest.param(
            ("--until", "2026-11-30T02:00:00"),
            "--until: '2026-11-30T02:00:00' has no offset (expected UTC with a Z",
            id="until_without_offset",
        ),
        pytest.param(
            ("--since", "2026-11-30T02:00:00Z", "--until", "2026-11-30T03:00:00+01:00"),
            "--until: '2026-11-30T02:00:00Z' is not after the start (2026-11-30T02:00:00Z)",
            id="empty_window",
        ),
        pytest.param(("--before-id", "0"), "--before-id: 0 is not an event id", id="id_zero"),
        pytest.param(
            ("--before-id", "9" * 20), f"--before-id: {'9' * 20} is not an event id", id="id_huge"
        ),
        pytest.param(
            ("--before-id", "\u0663"),
            "argument --before-id: '\u0663' is not a whole number",
            id="id_other_digits",
        ),
    ],
)
def test_an_impossible_window_or_page_is_one_line_naming_the_flag(
    database_url: str, flags: tuple[str, ...], said: str
) -> None:
    code, out, err = _events(database_url, *flags)
    assert code == 2, (out, err)
    assert out == ""
    assert len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"nachtwacht control events: {said}"), err
