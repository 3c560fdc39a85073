"""The customer's agent list over HTTP for a large organisation: the view in the URL, a bad
parameter answered at its field (never a server error), pages, and one schedule for many agents
(CSRF, the editor's rules, a change on the trail per agent whose schedule changed)."""

from __future__ import annotations

import re
from urllib.parse import quote
from uuid import UUID

import httpx
import psycopg
import pytest

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client


def add_agents(world: PanelWorld, names: list[str]) -> dict[str, str]:
    """More agents in the world's organisation, written straight to its database (fast)."""
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at)"
            " SELECT %s, name, now() FROM unnest(%s::text[]) AS name RETURNING id, name",
            [UUID(world.org_id), names],
        ).fetchall()
    return {name: str(agent_id) for agent_id, name in rows}


def listed_names(html: str) -> list[str]:
    return re.findall(r'<th scope="row"><a href="/panel/agents/[0-9a-f-]+">([^<]*)</a>', html)


def schedule_changes(world: PanelWorld) -> list[tuple[str, str]]:
    """Who changed a schedule, per change: the actor's kind and its credential's name."""
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "SELECT e.actor_kind, c.name FROM events e JOIN credentials c ON c.id = e.actor_id"
            " WHERE e.kind = 'schedule.changed' AND e.org_id = %s",
            [UUID(world.org_id)],
        ).fetchall()
    return [(kind, name) for kind, name in rows]


@pytest.fixture
def fleet(panel_world: PanelWorld) -> PanelWorld:
    add_agents(panel_world, [f"db-{i:03d}" for i in range(120)] + ["50% off", "a_b", "o'brien"])
    return panel_world


def test_the_view_is_in_the_url_and_pages_by_fifty(fleet: PanelWorld) -> None:
    with sign_in_client(fleet, fleet.panel_key) as client:
        first = client.get("/panel/agents", params={"q": "DB-", "sort": "-name"})
        third = client.get("/panel/agents", params={"q": "DB-", "sort": "-name", "page": "3"})
    assert first.status_code == 200
    names = listed_names(first.text)
    assert names == [f"db-{i:03d}" for i in range(119, 69, -1)]
    assert "120 agents" in first.text and "Page 1 of 3" in first.text
    assert 'href="/panel/agents?q=DB-&amp;sort=-name&amp;page=2"' in first.text
    assert listed_names(third.text) == [f"db-{i:03d}" for i in range(19, -1, -1)]


@pytest.mark.parametrize(
    ("search", "found"),
    [
        pytest.param("%", ["50% off"], id="percent"),
        pytest.param("_", ["a_b"], id="underscore"),
        pytest.param("'", ["o'brien"], id="quote"),
    ],
)
def test_a_search_means_its_characters(fleet: PanelWorld, search: str, found: list[str]) -> None:
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = client.get(f"/panel/agents?q={quote(search)}")
    assert answer.status_code == 200
    assert listed_names(answer.text) == [name.replace("'", "&#39;") for name in found]


_NOT_SENT = "is not a value this form sends. Go back and use the form as the page shows it."
_PAGES = "is not accepted. Give a whole number from 1 to 3."


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        pytest.param("state=pinned%3B", "state", f"State: “pinned;” {_NOT_SENT}", id="state"),
        pytest.param(
            "state=%E2%80%AEheld", "state", f"State: “\ufffdheld” {_NOT_SENT}", id="state_bidi"
        ),
        pytest.param("sort=name%3BDROP", "sort", f"Order: “name;DROP” {_NOT_SENT}", id="sort"),
        pytest.param("sort=NAME", "sort", f"Order: “NAME” {_NOT_SENT}", id="sort_case"),
        pytest.param("sort=%3Cb%3Ex", "sort", f"Order: “&lt;b&gt;x” {_NOT_SENT}", id="sort_markup"),
        pytest.param("page=0", "page", f"Page: “0” {_PAGES}", id="page_zero"),
        pytest.param("page=-1", "page", f"Page: “-1” {_PAGES}", id="page_negative"),
        pytest.param("page=4", "page", f"Page: “4” {_PAGES}", id="past_the_end"),
        pytest.param("page=x", "page", f"Page: “x” {_PAGES}", id="page_not_a_number"),
        pytest.param("page=%2B2", "page", f"Page: “+2” {_PAGES}", id="page_plus"),
        pytest.param("page=%EF%BC%92", "page", f"Page: “\uff12” {_PAGES}", id="wide_digit"),
        pytest.param("page=" + "9" * 5000, "page", f"Page: “{'9' * 40}…” {_PAGES}", id="huge_page"),
        pytest.param(
            "q=" + "x" * 10_000,
            "q",
            f"Search by name: “{'x' * 40}…” is too long (10,000 characters). At most 200"
            " characters are accepted.",
            id="ten_kilobytes",
        ),
        pytest.param(
            "page=1&page=2",
            "page",
            "Page: “1” and “2”: two values for one field. Give one.",
            id="page_twice",
        ),
        pytest.param(
            "sort=name&sort=-name",
            "sort",
            "Order: “name” and “-name”: two values for one field. Give one.",
            id="sort_twice",
        ),
        pytest.param(
            "state=held&state=offline&state=held",
            "state",
            "State: “held” and “offline”: two values for one field. Give one.",
            id="state_twice",
        ),
        pytest.param(
            "q=web&q=db",
            "q",
            "Search by name: “web” and “db”: two values for one field. Give one.",
            id="search_twice",
        ),
    ],
)
def test_a_bad_parameter_is_answered_at_its_field(
    fleet: PanelWorld, query: str, field: str, message: str
) -> None:
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = client.get(f"/panel/agents?{query}")
    assert answer.status_code == 400
    said = re.findall(rf'<p class="field-error" id="{field}-error">([^<]*)</p>', answer.text)
    assert said == [message]
    assert f'id="{field}"' in answer.text
    assert 'aria-invalid="true"' in answer.text
    assert listed_names(answer.text) == []


@pytest.mark.parametrize("query", ["page=2&page=2", "sort=-name&sort=-name", "q=&q=", "x=1&x=2"])
def test_the_same_value_twice_says_one_thing(fleet: PanelWorld, query: str) -> None:
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = client.get(f"/panel/agents?{query}")
    assert answer.status_code == 200, answer.text
    assert listed_names(answer.text) != []


def test_a_nul_in_the_search_is_refused_before_the_panel(fleet: PanelWorld) -> None:
    # The server refuses a NUL anywhere in a query string before any page runs (the database
    # could not hold it); the list never sees one, and the answer is the panel's page saying so,
    # not an error and not the API's JSON.
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = client.get("/panel/agents?q=db%00")
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    assert "q: “db\ufffd” holds a NUL character" in answer.text
    assert listed_names(answer.text) == []


def _bulk(client: httpx.Client, url: str, data: dict[str, object]) -> httpx.Response:
    page = client.get(url)
    # A change answers with a redirect to the list (POST/redirect/GET), followed here.
    return client.post(
        "/panel/agents/schedules",
        data={"csrf": csrf_of(page.text), **data},
        follow_redirects=True,
    )


def test_one_schedule_for_every_agent_of_a_view(fleet: PanelWorld) -> None:
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = _bulk(
            client,
            "/panel/agents?q=db-0",
            {
                "q": "db-0",
                "enabled": "1",
                "times": "02:00, 04:30",
                "target": "matching",
                "count": "100",
            },
        )
        again = _bulk(
            client,
            "/panel/agents?q=db-0",
            {
                "q": "db-0",
                "enabled": "1",
                "times": "04:30,02:00",
                "target": "matching",
                "count": "100",
            },
        )
    assert answer.status_code == 200, answer.text
    assert "The schedules of 100 agents changed. 0 agents already had it." in answer.text
    assert "The schedules of 0 agents changed. 100 agents already had it." in again.text
    assert schedule_changes(fleet) == [("user", "first panel key")] * 100


def test_one_schedule_for_the_selected_agents(fleet: PanelWorld) -> None:
    ids = add_agents(fleet, ["picked-1", "picked-2"])
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = _bulk(
            client,
            "/panel/agents",
            {"times": "", "target": "selected", "agent": list(ids.values())},
        )
    assert answer.status_code == 200, answer.text
    assert "The schedules of 2 agents changed." in answer.text
    assert len(schedule_changes(fleet)) == 2


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        pytest.param(
            {"enabled": "1", "times": "02:00, 03:07", "target": "matching"},
            "bulk-times",
            "03:07 is not on the five-minute grid (for example 03:05 or 03:10).",
            id="off_the_grid",
        ),
        pytest.param(
            {"enabled": "1", "times": "02:00", "target": "selected"},
            "bulk-agent",
            "Select between 1 and 50 agents on this page.",
            id="nothing_selected",
        ),
    ],
)
def test_a_bad_bulk_form_changes_nothing_and_says_why_at_the_field(
    fleet: PanelWorld, data: dict[str, str], field: str, message: str
) -> None:
    with sign_in_client(fleet, fleet.panel_key) as client:
        answer = _bulk(client, "/panel/agents", data)
    assert answer.status_code == 422
    assert f'<p class="field-error" id="{field}-error">{message}</p>' in answer.text
    assert schedule_changes(fleet) == []


def test_the_bulk_form_needs_its_csrf_token_and_the_organisations_agents(
    fleet: PanelWorld,
) -> None:
    other = fleet.server.create_org("Other")
    theirs = fleet.server.enroll_agent(other["org_id"], "theirs")
    with sign_in_client(fleet, fleet.panel_key) as client:
        forged = client.post(
            "/panel/agents/schedules",
            data={"csrf": "forged", "enabled": "1", "times": "02:00", "target": "matching"},
        )
        foreign = _bulk(
            client,
            "/panel/agents",
            {"enabled": "1", "times": "02:00", "target": "selected", "agent": [
                fleet.agent_id, theirs["agent_id"]
            ]},
        )  # fmt: skip
    assert forged.status_code == 403
    assert foreign.status_code == 404
    assert schedule_changes(fleet) == []
