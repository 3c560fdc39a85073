"""An organisation of 2,000 agents, read and changed the way an attacker and a hurried customer
would: absurd pages, orders and filters, a view's bulk change sent twice (a double click, a
reload of the answer). Each is answered at its field or done once, and nothing else changes."""

from __future__ import annotations

import re
import time
from urllib.parse import quote
from uuid import UUID

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

AGENTS = 2000  # and the world's own web-01: 2,001, 41 pages


@pytest.fixture
def big_fleet(panel_world: PanelWorld) -> PanelWorld:
    names = [f"host-{i:04d}" for i in range(AGENTS - 4)] + ["50%", "a_b", "back\\slash", "o'b"]
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO agents (org_id, name, created_at)"
            " SELECT %s, name, now() FROM unnest(%s::text[]) AS name",
            [UUID(panel_world.org_id), names],
        )
    return panel_world


def _names(html: str) -> list[str]:
    return re.findall(r'<th scope="row"><a href="/panel/agents/[0-9a-f-]+">([^<]*)</a>', html)


def _counts(world: PanelWorld) -> tuple[object, ...]:
    with psycopg.connect(world.server.database_url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM holds),"
            " (SELECT count(*) FROM runs), (SELECT count(*) FROM agents)"
        ).fetchone()
    assert row is not None
    return tuple(row)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("page=-1", "page"),
        ("page=0", "page"),
        ("page=" + "1" + "0" * 30, "page"),
        ("page=42", "page"),
        ("page=1e3", "page"),
        ("page=%EF%BC%91", "page"),
        ("sort=password", "sort"),
        ("sort=name%27--", "sort"),
        ("sort=--name", "sort"),
        ("state=%25", "state"),
        ("state=offline%27%20OR%201%3D1", "state"),
        ("page=1&page=41", "page"),
        ("sort=name&sort=-name", "sort"),
    ],
)
def test_an_absurd_view_is_answered_at_its_field(
    big_fleet: PanelWorld, query: str, field: str
) -> None:
    with sign_in_client(big_fleet, big_fleet.panel_key) as client:
        before = _counts(big_fleet)
        answer = client.get(f"/panel/agents?{query}")
        assert answer.status_code == 400
        assert f'id="{field}-error"' in answer.text
        assert _names(answer.text) == []
        assert _counts(big_fleet) == before


def test_the_last_page_of_two_thousand(big_fleet: PanelWorld) -> None:
    with sign_in_client(big_fleet, big_fleet.panel_key) as client:
        started = time.monotonic()
        answer = client.get("/panel/agents?page=41&sort=-name")
        took = time.monotonic() - started
    assert answer.status_code == 200
    assert _names(answer.text) == ["50%"]  # the last in reverse order of names
    assert "Page 41 of 41" in answer.text
    assert took < 5


@pytest.mark.parametrize(
    ("search", "found"),
    [("%", ["50%"]), ("_", ["a_b"]), ("\\", ["back\\slash"]), ("%_\\", [])],
)
def test_like_characters_mean_themselves(
    big_fleet: PanelWorld, search: str, found: list[str]
) -> None:
    with sign_in_client(big_fleet, big_fleet.panel_key) as client:
        answer = client.get(f"/panel/agents?q={quote(search)}")
    assert answer.status_code == 200
    assert _names(answer.text) == found


def _view_form(client: httpx.Client) -> dict[str, str]:
    page = client.get("/panel/agents")
    return {"csrf": csrf_of(page.text), "target": "matching", "count": str(AGENTS + 1)}


def _holds(world: PanelWorld) -> list[tuple[object, ...]]:
    with psycopg.connect(world.server.database_url) as conn:
        return [
            tuple(row)
            for row in conn.execute(
                "SELECT agent_id, until, reason, set_by FROM holds ORDER BY agent_id"
            ).fetchall()
        ]


def test_an_update_for_the_whole_view_sent_twice_is_asked_once(big_fleet: PanelWorld) -> None:
    with sign_in_client(big_fleet, big_fleet.panel_key) as client:
        form = _view_form(client) | {"action": "update"}
        first = client.post("/panel/agents/bulk", data=form, follow_redirects=True)
        after_first = _counts(big_fleet)
        again = client.post("/panel/agents/bulk", data=form, follow_redirects=True)
    assert first.status_code == 200 and again.status_code == 200
    assert "2,001" in first.text
    assert _counts(big_fleet) == after_first  # no second request, no second trail entry


def test_a_hold_for_the_whole_view_sent_twice_holds_each_agent_once(
    big_fleet: PanelWorld,
) -> None:
    with sign_in_client(big_fleet, big_fleet.panel_key) as client:
        form = _view_form(client) | {
            "action": "hold",
            "until": "2027-04-02",
            "reason": "patch window",
        }
        first = client.post("/panel/agents/bulk", data=form, follow_redirects=True)
        holds, after_first = _holds(big_fleet), _counts(big_fleet)
        again = client.post("/panel/agents/bulk", data=form, follow_redirects=True)
    assert first.status_code == 200 and again.status_code == 200
    assert [step.status_code for step in again.history] == [303]  # POST/redirect/GET
    assert len(holds) == AGENTS + 1
    assert _holds(big_fleet) == holds
    assert _counts(big_fleet) == after_first  # no second trail entry for any agent
    assert "2,001 agents were already held so: nothing changed for them." in again.text
