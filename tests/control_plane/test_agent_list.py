"""The agent list of a large organisation, paged by the database: search (a part of the name, any
case, with `%`, `_` and quotes meaning themselves), states, orders in both directions, pages that
cover the list exactly once, and one schedule set for many agents in one transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID

import pytest

from control_plane.agents.agent_list import PAGE_SIZE, AgentQuery
from control_plane.errors import InvalidInput, NotFound
from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Org
from tests.worlds.clocks import ManualClock

FLEET = 300
ONLINE = timedelta(minutes=3)
PANEL_KEY = Actor(kind="user", name="first panel key")


def _fleet(pool: Pool, org: Org, now: datetime, count: int = FLEET) -> dict[str, UUID]:
    """`count` agents named host-000…, seen a minute apart going back from `now`, each on a
    version 1.<i mod 12>.0 (so 1.10.0 and 1.11.0 sort after 1.9.0 only by number)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at, current_version, last_seen_at)"
            " SELECT %s, 'host-' || lpad(i::text, 3, '0'), %s, '1.' || (i %% 12) || '.0',"
            "  %s - make_interval(mins => i)"
            " FROM generate_series(0, %s - 1) AS i RETURNING id, name",
            [UUID(org.org_id), now, now, count],
        ).fetchall()
    return {row["name"]: row["id"] for row in rows}


def _names(
    services: Services, org: Org, now: datetime, **query: object
) -> tuple[list[str], int, int]:
    listed = services.agents.overview(
        UUID(org.org_id), now=now, query=AgentQuery(**query), online_since=now - ONLINE
    )  # type: ignore[arg-type]
    return [a.name for a in listed.agents], listed.total, listed.pages


def _every_page(services: Services, org: Org, now: datetime, **query: object) -> list[str]:
    first, _, pages = _names(services, org, now, **query)
    names = list(first)
    for number in range(2, pages + 1):
        names += _names(services, org, now, page=number, **query)[0]
    return names


def _add_run(pool: Pool, agent_id: UUID, org: Org, status: str, at: datetime) -> None:
    with pool.connection() as conn:
        if status == "missed":
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                " miss_reason, created_at) VALUES (%s, %s, 'schedule', %s, %s, 'missed',"
                " 'offline', %s)",
                [agent_id, UUID(org.org_id), at.strftime("%Y-%m-%dT%H:%M"), at, at],
            )
        else:
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
                " VALUES (%s, %s, 'manual', %s, %s)",
                [agent_id, UUID(org.org_id), status, at],
            )


@pytest.mark.parametrize("descending", [False, True], ids=["a_to_z", "z_to_a"])
def test_pages_cover_the_list_once_in_name_order(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    descending: bool,
) -> None:
    org = make_org("Hoster")
    _fleet(pool, make_org("Other"), clock.now(), count=20)
    names = _fleet(pool, org, clock.now())

    first, total, pages = _names(services, org, clock.now(), descending=descending)
    listed = _every_page(services, org, clock.now(), descending=descending)

    assert (len(first), total, pages) == (PAGE_SIZE, FLEET, 6)
    assert listed == sorted(names, reverse=descending)


def test_a_page_past_the_last_holds_no_agent_and_says_how_many_there_are(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    org = make_org("Hoster")
    _fleet(pool, org, clock.now())
    assert _names(services, org, clock.now(), page=7) == ([], FLEET, 6)
    assert _names(services, org, clock.now(), page=6)[0][-1] == "host-299"


@pytest.mark.parametrize(
    ("search", "found"),
    [
        pytest.param("%", ["50% off"], id="percent_is_a_percent"),
        pytest.param("_", ["a_b"], id="underscore_is_an_underscore"),
        pytest.param("'", ["o'brien"], id="quote_is_a_quote"),
        pytest.param("A_B", ["a_b"], id="any_case"),
        pytest.param("BRIEN", ["o'brien"], id="any_case_inside"),
        pytest.param("ÖSTER", ["österreich"], id="any_case_beyond_ascii"),
        pytest.param("\\", ["back\\slash"], id="backslash_is_a_backslash"),
        pytest.param("host-29", [f"host-29{i}" for i in range(10)], id="a_part_of_the_name"),
        pytest.param("nothing-like-it", [], id="no_match"),
    ],
)
def test_search_finds_a_part_of_the_name_literally(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    search: str,
    found: list[str],
) -> None:
    org = make_org("Hoster")
    _fleet(pool, org, clock.now())
    with pool.connection() as conn:
        for name in ["50% off", "a_b", "axb", "o'brien", "back\\slash", "50 off", "österreich"]:
            conn.execute(
                "INSERT INTO agents (org_id, name, created_at) VALUES (%s, %s, %s)",
                [UUID(org.org_id), name, clock.now()],
            )
    names, total, _ = _names(services, org, clock.now(), search=search)
    assert (names, total) == (found, len(found))


@pytest.mark.parametrize(
    ("field", "query"),
    [
        pytest.param("search", {"search": "web\x00"}, id="nul_in_search"),
        pytest.param("search", {"search": "x" * 10_000}, id="ten_kilobyte_search"),
        pytest.param("state", {"state": "pinned; --"}, id="unknown_state"),
        pytest.param("sort", {"sort": "name; DROP TABLE agents"}, id="unknown_sort"),
        pytest.param("page", {"page": 0}, id="page_zero"),
        pytest.param("page", {"page": -1}, id="negative_page"),
        pytest.param("page", {"page": True}, id="page_true"),
    ],
)
def test_a_bad_query_is_refused_naming_its_field(field: str, query: dict[str, object]) -> None:
    with pytest.raises(InvalidInput) as refused:
        AgentQuery(**query)  # type: ignore[arg-type]
    assert refused.value.fields["field"] == field


def test_states_filter_by_newest_run_connection_and_hold(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    other = make_org("Other")
    ids = _fleet(pool, org, now, count=10)
    theirs = _fleet(pool, other, now, count=10)
    earlier, later = now - timedelta(hours=2), now - timedelta(hours=1)
    _add_run(pool, ids["host-001"], org, "failed", later)
    _add_run(pool, ids["host-002"], org, "rolled_back", later)
    _add_run(pool, ids["host-003"], org, "failed", earlier)  # since then it updated
    _add_run(pool, ids["host-003"], org, "succeeded", later)
    _add_run(pool, ids["host-004"], org, "missed", later)
    _add_run(pool, ids["host-005"], org, "missed", earlier)  # then it failed
    _add_run(pool, ids["host-005"], org, "failed", later)
    _add_run(pool, theirs["host-001"], other, "failed", later)
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO holds (agent_id, until, set_by, set_at) VALUES"
            " (%s, %s, 'customer', %s), (%s, %s, 'customer', %s)",
            [
                *(ids["host-006"], now + timedelta(days=1), earlier),
                *(ids["host-007"], now - timedelta(minutes=1), earlier - timedelta(days=1)),
            ],
        )
        conn.execute("UPDATE agents SET last_seen_at = NULL WHERE id = %s", [ids["host-000"]])

    assert _names(services, org, now, state="failed")[0] == ["host-001", "host-002", "host-005"]
    assert _names(services, org, now, state="missed")[0] == ["host-004"]
    assert _names(services, org, now, state="held")[0] == ["host-006"]
    # Seen 0, 1 and 2 minutes ago: online; 3 minutes and more, or never: offline.
    offline = _names(services, org, now, state="offline")[0]
    assert offline == ["host-000"] + [f"host-00{i}" for i in range(4, 10)]
    assert _names(services, org, now, state="failed", search="5")[0] == ["host-005"]


def test_orders_put_the_unknown_last_in_both_directions(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    ids = _fleet(pool, org, now, count=12)
    with pool.connection() as conn:
        conn.execute(
            "UPDATE agents SET current_version = v, last_seen_at = NULL FROM (VALUES"
            " (%s::uuid, '1.10.0-rc.1'), (%s::uuid, NULL), (%s::uuid, 'weird')) AS x (id, v)"
            " WHERE agents.id = x.id",
            [ids["host-000"], ids["host-001"], ids["host-002"]],
        )
    by_version = _every_page(services, org, now, sort="version")
    assert by_version[:3] == ["host-003", "host-004", "host-005"]  # 1.3.0, 1.4.0, 1.5.0
    assert by_version[6:12] == [
        "host-009", "host-000", "host-010", "host-011", "host-001", "host-002"
    ]  # fmt: skip
    newest_first = _every_page(services, org, now, sort="version", descending=True)
    assert newest_first[:3] == ["host-011", "host-010", "host-000"]
    assert newest_first[-2:] == ["host-001", "host-002"]

    seen = _every_page(services, org, now, sort="seen")
    assert seen[:2] == ["host-011", "host-010"]
    assert seen[-3:] == ["host-000", "host-001", "host-002"]
    recent = _every_page(services, org, now, sort="seen", descending=True)
    assert recent[:2] == ["host-003", "host-004"] and recent[-3:] == seen[-3:]

    _add_run(pool, ids["host-007"], org, "succeeded", now)
    _add_run(pool, ids["host-008"], org, "missed", now)
    _add_run(pool, ids["host-009"], org, "failed", now)
    worst = _every_page(services, org, now, sort="outcome")
    assert worst[:3] == ["host-009", "host-008", "host-007"]
    best = _every_page(services, org, now, sort="outcome", descending=True)
    assert best[:3] == ["host-007", "host-008", "host-009"]


def test_the_page_shows_each_agents_newest_run(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    ids = _fleet(pool, org, now, count=60)
    _add_run(pool, ids["host-055"], org, "failed", now - timedelta(hours=2))
    _add_run(pool, ids["host-055"], org, "succeeded", now - timedelta(hours=1))
    listed = services.agents.overview(
        UUID(org.org_id), now=now, query=AgentQuery(page=2), online_since=now - ONLINE
    )
    runs = {a.name: a.last_run.status if a.last_run else None for a in listed.agents}
    assert runs["host-055"] == "succeeded"
    assert {status for name, status in runs.items() if name != "host-055"} == {None}


def _schedule_events(pool: Pool, org: Org) -> list[dict[str, object]]:
    with pool.connection() as conn:
        return conn.execute(
            "SELECT agent_id, actor_kind, actor_name, data FROM events"
            " WHERE kind = 'schedule.changed' AND org_id = %s",
            [UUID(org.org_id)],
        ).fetchall()


def test_one_schedule_for_every_agent_of_a_view_changes_each_once(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    other = make_org("Other")
    ids = _fleet(pool, org, now, count=120)
    _fleet(pool, other, now, count=20)
    services.agents.set_schedule(
        UUID(org.org_id), ids["host-100"], enabled=True, times=["02:00"], now=now, actor=PANEL_KEY
    )
    before = len(_schedule_events(pool, org))

    changes = services.agents.set_schedules(
        UUID(org.org_id),
        query=AgentQuery(search="host-1", page=1),  # the page does not limit the set
        enabled=True,
        times=["02:00"],
        now=now,
        actor=PANEL_KEY,
    )

    assert (changes.changed, changes.unchanged) == (19, 1)
    events = _schedule_events(pool, org)[before:]
    assert len(events) == 19
    assert ids["host-100"] not in {e["agent_id"] for e in events}
    assert {(e["actor_kind"], e["actor_name"]) for e in events} == {("user", "first panel key")}
    assert {str(e["data"]) for e in events} == {
        str({"after": {"times": ["02:00"], "enabled": True},
             "before": {"times": ["03:00"], "enabled": True}})
    }  # fmt: skip
    with pool.connection() as conn:
        moved = conn.execute(
            "SELECT count(*) AS n FROM agents WHERE update_schedule_times = '[\"02:00\"]'"
        ).fetchone()
    assert moved is not None and moved["n"] == 20


def test_a_selection_with_another_organisations_agent_changes_nothing(
    services: Services, pool: Pool, clock: ManualClock, make_org: Callable[[str], Org]
) -> None:
    now = clock.now()
    org = make_org("Hoster")
    mine = _fleet(pool, org, now, count=3)
    theirs = _fleet(pool, make_org("Other"), now, count=1)
    with pytest.raises(NotFound):
        services.agents.set_schedules(
            UUID(org.org_id),
            agent_ids=[mine["host-000"], theirs["host-000"]],
            enabled=True,
            times=["02:00"],
            now=now,
            actor=PANEL_KEY,
        )
    with pool.connection() as conn:
        moved = conn.execute(
            "SELECT count(*) AS n FROM agents WHERE update_schedule_times <> '[\"03:00\"]'"
        ).fetchone()
    assert moved is not None and moved["n"] == 0
    assert _schedule_events(pool, org) == []


@pytest.mark.parametrize(
    ("times", "field"),
    [
        pytest.param(["03:07"], "times[0]", id="off_the_grid"),
        pytest.param(["02:00", "02:00"], "times[1]", id="twice"),
        pytest.param([], "times", id="on_without_a_time"),
    ],
)
def test_a_bad_schedule_changes_no_agent(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    times: list[str],
    field: str,
) -> None:
    org = make_org("Hoster")
    ids = _fleet(pool, org, clock.now(), count=3)
    with pytest.raises(InvalidInput) as refused:
        services.agents.set_schedules(
            UUID(org.org_id),
            agent_ids=list(ids.values()),
            enabled=True,
            times=times,
            now=clock.now(),
            actor=PANEL_KEY,
        )
    assert str(refused.value.fields["field"]).startswith(field.split("[")[0])
    assert _schedule_events(pool, org) == []
