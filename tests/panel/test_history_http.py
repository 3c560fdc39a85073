"""The customer's history over HTTP: pages back to the retention limit by (time, id), links that
keep the view's filters, a bad field answered at the field, another organisation's agent not
found; the CSV export streamed for a bounded range with formulas defused; the agents per version
night by night."""

from __future__ import annotations

import csv
import html
import io
import re
from uuid import UUID

import httpx
import psycopg
import pytest

from control_plane.history import MAX_EXPORT_DAYS
from control_plane.panel.history import csv_cell
from tests.panel.conftest import PanelWorld, sign_in_client
from tests.panel.history_world import HOSTILE_ERROR, HOSTILE_NAME, add_agent, add_nights


def _link(page: str, rel: str) -> str | None:
    found = re.search(rf'<a href="([^"]+)" rel="{rel}">', page)
    return html.unescape(found.group(1)) if found else None


def _run_lines(page: str) -> list[str]:
    """The page's runs as shown: each line names its agent (on the organisation's pages) and its
    slot's time, which tell the seeded runs apart."""
    return re.findall(r'<li class="run-[a-z_]+">(.*?)</li>', page, flags=re.S)


def _walk(client: httpx.Client, first: str) -> list[httpx.Response]:
    pages = [client.get(first)]
    while (older := _link(pages[-1].text, "next")) is not None:
        pages.append(client.get(older))
        assert len(pages) < 20, "the pages never end"
    return pages


def test_an_agents_runs_page_back_to_the_end_and_say_what_retention_removed(
    panel_world: PanelWorld,
) -> None:
    add_nights(panel_world, panel_world.agent_id, 120)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        pages = _walk(client, f"/panel/history/runs?agent={panel_world.agent_id}")
        back = client.get(_link(pages[1].text, "prev") or "")
    assert [page.status_code for page in pages] == [200, 200, 200]
    lines = [line for page in pages for line in _run_lines(page.text)]
    assert len(lines) == 120
    assert len(set(lines)) == 120, "a run shown on two pages"
    ended = "Updates older than 400 days are removed, with their timeline."
    assert [ended in page.text for page in pages] == [False, False, True]
    assert _link(pages[0].text, "prev") is None
    assert _run_lines(back.text) == _run_lines(pages[0].text)


def test_runs_of_the_same_time_are_paged_by_their_id_without_loss(panel_world: PanelWorld) -> None:
    """Sixty agents' runs of one slot share their time: the page boundary falls among them."""
    for number in range(60):
        add_nights(panel_world, add_agent(panel_world, f"host-{number:02d}"), 1)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        pages = _walk(client, "/panel/history/runs")
    lines = [line for page in pages for line in _run_lines(page.text)]
    assert len(pages) == 2
    assert len(lines) == 60
    assert len(set(lines)) == 60


def test_the_older_and_newer_links_keep_the_filters(panel_world: PanelWorld) -> None:
    add_nights(panel_world, panel_world.agent_id, 120)
    view = f"agent={panel_world.agent_id}&from=2026-12-01&to=2027-03-26"
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        first = client.get(f"/panel/history/events?{view}")
        older = _link(first.text, "next")
        assert older is not None
        second = client.get(older)
        newer = _link(second.text, "prev")
    for link in (older, newer):
        assert link is not None
        assert f"agent={panel_world.agent_id}" in link
        assert "from=2026-12-01" in link
        assert "to=2027-03-26" in link
    assert second.status_code == 200


def test_a_range_narrows_the_pages(panel_world: PanelWorld) -> None:
    add_nights(panel_world, panel_world.agent_id, 120)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/history/runs?from=2027-03-20&to=2027-03-26")
    assert len(_run_lines(page.text)) == 7
    assert _link(page.text, "next") is None


@pytest.mark.parametrize(
    ("query", "field"),
    [
        pytest.param("from=2027-02-30", "from", id="no_such_day"),
        pytest.param("to=yesterday", "to", id="not_a_date"),
        pytest.param("from=2027-03-20&to=2027-03-01", "to", id="last_before_first"),
        pytest.param("before=12.not-a-uuid", "before", id="position_unreadable"),
        pytest.param("after=99999999999999999999999.1", "after", id="position_out_of_range"),
    ],
)
def test_a_field_that_cannot_be_read_is_said_at_the_field(
    panel_world: PanelWorld, query: str, field: str
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/history/runs?{query}")
    assert page.status_code == 400
    if field in {"from", "to"}:
        assert f'id="{field}-error"' in page.text
    else:
        assert "This page could not be found; here is the newest." in page.text


def test_another_organisations_agent_is_not_found(panel_world: PanelWorld) -> None:
    other = panel_world.server.create_org("Other")
    theirs = panel_world.server.enroll_agent(other["org_id"], "theirs")
    add_nights(panel_world, panel_world.agent_id, 3)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get(f"/panel/history/runs?agent={theirs['agent_id']}")
        export = client.get(
            f"/panel/history/runs.csv?agent={theirs['agent_id']}&from=2027-03-01&to=2027-03-26"
        )
    assert page.status_code == 404
    assert export.status_code == 404


def _exported(client: httpx.Client, url: str) -> list[dict[str, str]]:
    with client.stream("GET", url) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["content-type"].startswith("text/csv")
        assert "attachment" in answer.headers["content-disposition"]
        text = "".join(answer.iter_text())
    return list(csv.DictReader(io.StringIO(text)))


def test_an_export_holds_every_run_of_its_range_and_defuses_formulas(
    panel_world: PanelWorld,
) -> None:
    hostile = add_agent(panel_world, HOSTILE_NAME)
    add_nights(panel_world, hostile, 30, version="-1+1", error=HOSTILE_ERROR)
    add_nights(panel_world, panel_world.agent_id, 120)
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        runs = _exported(client, "/panel/history/runs.csv?from=2027-02-25&to=2027-03-26")
        events = _exported(
            client, f"/panel/history/events.csv?agent={hostile}&from=2027-02-25&to=2027-03-26"
        )
    assert len(runs) == 30 + 30
    mine = [row for row in runs if row["agent_id"] == hostile]
    assert len(mine) == 30
    for row in mine:
        assert row["agent_name"] == "'" + HOSTILE_NAME
        assert row["error"] == "'" + HOSTILE_ERROR
        assert row["version"] == "'-1+1"
    assert len(events) == 30
    assert {row["agent_name"] for row in events} == {"'" + HOSTILE_NAME}
    assert {row["kind"] for row in events} == {"update.succeeded"}


def test_an_export_says_what_stopped_a_skipped_slots_release_in_its_last_column(
    panel_world: PanelWorld,
) -> None:
    """`stopped_by` is added after every earlier column: a reader by position is not moved."""
    halted, braked, ran = add_nights(panel_world, panel_world.agent_id, 3)
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "UPDATE runs SET status = 'skipped', skip_reason = 'release_halted',"
            " stopped_by = CASE id WHEN %s THEN 'halt' ELSE 'brake' END WHERE id IN (%s, %s)",
            [UUID(halted), UUID(halted), UUID(braked)],
        )
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        runs = _exported(client, "/panel/history/runs.csv?from=2027-03-20&to=2027-03-26")
    assert list(runs[0]) == [
        "time_utc", "agent_id", "agent_name", "trigger", "slot_utc", "status", "from_version",
        "version", "reason", "miss_reason", "skip_reason", "error", "run_id", "stopped_by",
    ]  # fmt: skip
    stopped = {row["run_id"]: (row["skip_reason"], row["stopped_by"]) for row in runs}
    assert stopped == {
        halted: ("release_halted", "halt"),
        braked: ("release_halted", "brake"),
        ran: ("", ""),
    }


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        pytest.param("=1+1", "'=1+1", id="equals"),
        pytest.param("+1", "'+1", id="plus"),
        pytest.param("-1", "'-1", id="minus"),
        pytest.param("@SUM(A1)", "'@SUM(A1)", id="at"),
        pytest.param("\t=1", "'\t=1", id="tab"),
        pytest.param("\r=1", "'\r=1", id="carriage_return"),
        pytest.param("web-01", "web-01", id="plain_name"),
        pytest.param(None, "", id="nothing"),
    ],
)
def test_a_cell_a_spreadsheet_would_run_is_written_as_text(value: str | None, cell: str) -> None:
    assert csv_cell(value) == cell


@pytest.mark.parametrize(
    "query",
    [
        pytest.param("from=2027-03-01", id="no_last_day"),
        pytest.param("", id="no_range"),
        pytest.param("from=2026-12-01&to=2027-03-26", id="longer_than_the_maximum"),
    ],
)
def test_an_export_without_a_bounded_range_is_refused_at_the_range(
    panel_world: PanelWorld, query: str
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        answer = client.get(f"/panel/history/runs.csv?{query}")
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("text/html")
    said = (
        "First day “2026-12-01”, last day “2027-03-26”: 116 days. An export holds at most 92 days."
        if "to=" in query
        else f"at most {MAX_EXPORT_DAYS} days apart"
    )
    assert said in html.unescape(answer.text)


def test_the_versions_per_night_count_each_agents_last_version(panel_world: PanelWorld) -> None:
    add_nights(panel_world, panel_world.agent_id, 14, version="2.4.0")
    newer = add_agent(panel_world, "db-01")
    add_nights(panel_world, newer, 3, version="2.4.1")
    # A second run the same night: the agent's last of the night is what it ran at its end.
    with psycopg.connect(panel_world.server.database_url) as conn:
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, status, version, created_at)"
            " VALUES (%s, %s, 'manual', 'succeeded', '2.4.1', '2027-03-26T03:00Z')",
            [UUID(panel_world.agent_id), UUID(panel_world.org_id)],
        )
        # A later run that reported no version (it failed before the agent said) hides nothing.
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
            " VALUES (%s, %s, 'manual', 'failed', '2027-03-26T04:00Z')",
            [UUID(panel_world.agent_id), UUID(panel_world.org_id)],
        )
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        page = client.get("/panel/history/versions?nights=7")
        bad = client.get("/panel/history/versions?nights=8")
    assert page.status_code == 200
    titles = re.findall(r"<g><title>([^<]*)</title>", page.text)
    assert len(titles) == 7
    # The most common version first (2.4.0: six agent-nights, 2.4.1: four).
    assert titles[-1] == "March 26: 2.4.0 0, 2.4.1 2"
    assert titles[-2] == "March 25: 2.4.0 1, 2.4.1 1"
    assert titles[0] == "March 20: 2.4.0 1, 2.4.1 0"
    assert bad.status_code == 400
    assert 'id="nights-error"' in bad.text
