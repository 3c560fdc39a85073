"""Retention: runs, their events and notifications older than `retention_days` are removed in
bounded batches by the reconcile worker; what a person or the product still reads is kept, and
the trail of actions is kept forever."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from control_plane.errors import ConfigurationError, InvalidInput
from control_plane.metrics.exposition import render_metrics
from control_plane.registry import Services
from control_plane.retention import RetentionBatches, RetentionWalk, read_standing
from control_plane.retention.batches import MIN_TRANSACTIONS_PER_TICK
from control_plane.settings.services import PlatformSettings
from control_plane.types import Connection, Pool
from tests.control_plane.conftest import Agent, Org, SignedRelease
from tests.control_plane.reconcile_fleet import Fleet
from tests.control_plane.retention_history import BOOKKEEPING, History, picture, removed_rows
from tests.worlds.clocks import ManualClock

SMALL = RetentionBatches(rows=3, owners_per_step=2, transactions_per_tick=10_000, pause_seconds=0)
EXPIRED = 450  # days ago: past the default 400
YOUNG = 20


@pytest.fixture
def history(pool: Pool, clock: ManualClock, published: SignedRelease) -> History:
    with pool.connection() as conn:
        row = conn.execute("SELECT id FROM releases").fetchone()
    assert row is not None
    return History(pool, clock.now(), row["id"])


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, services, clock)
    yield made
    made.close()


def _ids(agent: Agent) -> tuple[UUID, UUID]:
    return UUID(agent.agent_id), UUID(agent.org_id)


def _seed_a_year_and_more(
    history: History,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> None:
    """Three organisations, five agents, every kind of row old and young."""
    acme, globex, initech = make_org("Acme"), make_org("Globex"), make_org("Initech")
    steady = _ids(make_agent(acme, "steady"))
    for days in (EXPIRED + 60, EXPIRED + 30, EXPIRED, EXPIRED - 1):
        history.run(*steady, days_ago=days, expect_removed=True)
    history.run(*steady, days_ago=EXPIRED, trigger="manual", expect_removed=True)
    for days in (YOUNG, YOUNG - 1, 1):
        history.run(*steady, days_ago=days, expect_removed=False)
    history.run(*steady, days_ago=399, expect_removed=False)  # one day inside the setting

    # Gone quiet a year and a half ago: its newest run stays (the panel's "last update").
    quiet = _ids(make_agent(acme, "quiet"))
    history.run(*quiet, days_ago=EXPIRED + 100, expect_removed=True)
    history.run(*quiet, days_ago=EXPIRED + 50, expect_removed=False)

    # Its newest runs report no version: the newest one that did stays ("which agents run a
    # withdrawn version"), older ones go.
    silent = _ids(make_agent(globex, "versionless"))
    history.run(*silent, days_ago=EXPIRED + 20, expect_removed=True)
    history.run(*silent, days_ago=EXPIRED + 10, expect_removed=False)
    history.run(*silent, days_ago=EXPIRED + 5, status="failed", version=None, expect_removed=True)
    history.run(
        *silent,
        days_ago=EXPIRED,
        trigger="manual",
        status="failed",
        version=None,
        expect_removed=False,
    )  # the newest run of all
    # The newest scheduled run stays even when a manual run came after it.
    history.run(*silent, days_ago=EXPIRED + 1, status="failed", version=None, expect_removed=False)

    # A claim still open from long ago, and a halt's evidence: kept whatever their age.
    stuck = _ids(make_agent(globex, "stuck"))
    history.run(*stuck, days_ago=EXPIRED + 40, status="claimed", expect_removed=False)
    evidence = history.run(
        *stuck, days_ago=EXPIRED + 30, status="failed", version=None, expect_removed=False
    )
    history.halt_evidence(evidence, days_ago=EXPIRED + 30)
    history.run(*stuck, days_ago=YOUNG, expect_removed=False)

    lone = _ids(make_agent(initech, "lone"))
    history.run(*lone, days_ago=YOUNG, expect_removed=False)

    for agent_id, org_id in (steady, silent):
        history.notification(org_id, agent_id, days_ago=EXPIRED, expect_removed=True)
        history.notification(org_id, agent_id, days_ago=EXPIRED + 7, expect_removed=True)
        history.notification(org_id, agent_id, days_ago=YOUNG, expect_removed=False)
        history.refusal(agent_id, days_ago=EXPIRED)
        history.refusal(agent_id, days_ago=YOUNG)
        history.unreachable(agent_id, days_ago=EXPIRED)
        history.unreachable(agent_id, days_ago=YOUNG)
        history.round(org_id, days_ago=EXPIRED)
        history.round(org_id, days_ago=YOUNG)
    # The trail: old actions with no run stay forever.
    for kind in ("schedule.changed", "brake.engaged", "release.published", "credential.revoked"):
        history.trail(UUID(acme.org_id), kind, days_ago=EXPIRED + 200)


def _ids_of(conn: Connection, table: str) -> set[Any]:
    """The ids in `table`; for events, but the walk's own record of its completion."""
    only_history = " WHERE kind <> 'retention.completed'" if table == "events" else ""
    return {
        row["id"]
        for row in conn.execute(f"SELECT id FROM {table}{only_history}").fetchall()  # noqa: S608
    }


def _walk_to_the_end(walk: RetentionWalk, clock: ManualClock) -> None:
    assert walk.tick(clock.now()).completed


def test_expired_history_goes_and_everything_else_stays_exactly(
    pool: Pool,
    clock: ManualClock,
    history: History,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> None:
    _seed_a_year_and_more(history, make_org, make_agent)
    seeded = history.seeded
    with pool.connection() as conn:
        before = picture(conn)
        events_before = _ids_of(conn, "events")
    _walk_to_the_end(RetentionWalk(pool, batches=SMALL), clock)
    with pool.connection() as conn:
        after = picture(conn)
        runs = _ids_of(conn, "runs")
        events = _ids_of(conn, "events")
        notifications = _ids_of(conn, "notifications")
    assert runs == seeded.kept_runs
    # The enrolment's own trail (credentials issued) is kept with the seeded trail.
    assert events == events_before - seeded.removed_events
    assert seeded.kept_events <= events
    assert notifications == seeded.kept_notifications

    gone = removed_rows(before, after)
    expected_counts = {
        "runs": len(seeded.removed_runs),
        "events": len(seeded.removed_events),
        "notifications": len(seeded.removed_notifications),
        # Each removed run had its token; each notification its delivery, attempt, mention.
        "tokens": len(seeded.removed_runs),
        "webhook_deliveries": len(seeded.removed_notifications),
        "webhook_attempts": len(seeded.removed_notifications),
        "agent_mentions": len(seeded.removed_notifications),
        "slot_reviews": len(seeded.removed_notifications),
        "claim_refusals": 2,
        "unreachable_reports": 2,
        "claim_rounds_org": 2,
        "claim_rounds_global": 1,  # both organisations' grants in the same old round
    }
    for table, rows in gone.items():
        if table in BOOKKEEPING:
            continue
        assert sum(rows.values()) == expected_counts.get(table, 0), table
    # Nothing else changed: every table but the removals and the walk's own row is as it was.
    for table in after:
        if table in BOOKKEEPING:
            continue
        gained = after[table] - before[table]
        if table == "events":
            # The one event the walk adds: its completion, on the trail.
            assert len(gained) == 1 and '"kind": "retention.completed"' in next(iter(gained))
            continue
        assert gained == {}, f"{table} gained or changed rows"


def test_a_young_database_loses_nothing(
    pool: Pool, clock: ManualClock, history: History, make_org, make_agent
) -> None:
    agent_id, org_id = _ids(make_agent(make_org("Acme"), "web-01"))
    for days in (399, 300, 100, 1):
        history.run(agent_id, org_id, days_ago=days, expect_removed=False)
    history.notification(org_id, agent_id, days_ago=399, expect_removed=False)
    with pool.connection() as conn:
        before = picture(conn)
    _walk_to_the_end(RetentionWalk(pool, batches=SMALL), clock)
    with pool.connection() as conn:
        after = picture(conn)
    unchanged = BOOKKEEPING | {"events"}
    assert {table: rows for table, rows in after.items() if table not in unchanged} == {
        table: rows for table, rows in before.items() if table not in unchanged
    }
    with pool.connection() as conn:
        completed = conn.execute(
            "SELECT data FROM events WHERE kind = 'retention.completed'"
        ).fetchall()
    assert sum(after["events"].values()) == sum(before["events"].values()) + 1
    assert [row["data"]["removed"]["runs"] for row in completed] == [0]


def test_a_shorter_setting_removes_more(
    pool: Pool, services: Services, clock: ManualClock, history: History, make_org, make_agent
) -> None:
    agent_id, org_id = _ids(make_agent(make_org("Acme"), "web-01"))
    old = history.run(agent_id, org_id, days_ago=45, expect_removed=True)
    history.run(agent_id, org_id, days_ago=10, expect_removed=False)
    services.settings.update({"retention_days": 30}, now=clock.now())
    _walk_to_the_end(RetentionWalk(pool, batches=SMALL), clock)
    with pool.connection() as conn:
        assert conn.execute("SELECT 1 FROM runs WHERE id = %s", [old]).fetchone() is None


def _audit_removals(pool: Pool) -> None:
    """Count, per transaction and table, the rows every DELETE statement removed."""
    with pool.connection() as conn:
        conn.execute(
            "CREATE TABLE removal_audit (xid bigint, tab text, n bigint);"
            " CREATE FUNCTION audit_removal() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN INSERT INTO removal_audit SELECT txid_current(), TG_TABLE_NAME, count(*)"
            " FROM gone; RETURN NULL; END $$;"
        )
        for table in (
            "runs",
            "events",
            "notifications",
            "tokens",
            "claim_refusals",
            "unreachable_reports",
        ):
            conn.execute(
                f"CREATE TRIGGER audit_{table} AFTER DELETE ON {table}"
                " REFERENCING OLD TABLE AS gone FOR EACH STATEMENT"
                " EXECUTE FUNCTION audit_removal()"
            )


def test_no_transaction_removes_more_than_a_batch(
    pool: Pool, clock: ManualClock, history: History, make_org, make_agent
) -> None:
    org = make_org("Acme")
    for index in range(3):
        agent_id, org_id = _ids(make_agent(org, f"web-{index:02}"))
        for days in range(EXPIRED, EXPIRED + 8):
            history.run(agent_id, org_id, days_ago=days, events=4, expect_removed=True)
            history.unreachable(agent_id, days_ago=days)
        history.run(agent_id, org_id, days_ago=YOUNG, expect_removed=False)
        for days in range(EXPIRED, EXPIRED + 5):
            history.notification(org_id, agent_id, days_ago=days + index / 24, expect_removed=True)
    _audit_removals(pool)
    _walk_to_the_end(RetentionWalk(pool, batches=SMALL), clock)
    with pool.connection() as conn:
        per_transaction = conn.execute(
            "SELECT xid, tab, sum(n)::int AS n FROM removal_audit GROUP BY xid, tab"
        ).fetchall()
        tables_per_transaction = conn.execute(
            "SELECT xid, array_agg(DISTINCT tab ORDER BY tab) AS tabs FROM removal_audit"
            " WHERE n > 0 GROUP BY xid"
        ).fetchall()
        left = conn.execute("SELECT count(*) AS n FROM runs").fetchone()
        unreachable_left = conn.execute("SELECT count(*) AS n FROM unreachable_reports").fetchone()
    assert left == {"n": 3}
    assert unreachable_left == {"n": 0}
    assert per_transaction, "the walk removed nothing"
    assert max(row["n"] for row in per_transaction) <= SMALL.rows
    # A run's events go in transactions of their own, never with the run.
    for row in tables_per_transaction:
        assert not {"runs", "events"} <= set(row["tabs"]), row


def test_a_walk_stopped_midway_is_consistent_and_the_next_tick_finishes_it(
    pool: Pool,
    clock: ManualClock,
    history: History,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> None:
    _seed_a_year_and_more(history, make_org, make_agent)
    seeded = history.seeded
    with pool.connection() as conn:
        events_before = len(_ids_of(conn, "events"))
    stops = 0

    class Stopped(Exception):
        pass

    def die_on_the_fifth_pause(_seconds: float) -> None:
        nonlocal stops
        stops += 1
        if stops == 5:
            raise Stopped

    paused = RetentionBatches(
        rows=3, owners_per_step=2, transactions_per_tick=100, pause_seconds=0.001
    )
    with pytest.raises(Stopped):
        RetentionWalk(pool, batches=paused, sleep=die_on_the_fifth_pause).tick(clock.now())
    with pool.connection() as conn:
        standing = read_standing(conn)
        runs_left = conn.execute("SELECT count(*) AS n FROM runs").fetchone()
        events_left = conn.execute("SELECT count(*) AS n FROM events").fetchone()
        walk = conn.execute("SELECT walk_cutoff, walk_phase FROM retention_progress").fetchone()
    assert walk is not None and walk["walk_cutoff"] is not None, "the walk is still under way"
    total_runs = len(seeded.removed_runs) + len(seeded.kept_runs)
    total_events = events_before
    assert runs_left is not None and events_left is not None
    # The counters say exactly what is gone: every removal committed with its count.
    assert standing.removed["runs"] == total_runs - runs_left["n"]
    assert standing.removed["events"] == total_events - events_left["n"]
    assert standing.removed["runs"] + standing.removed["events"] > 0

    # The next tick, on a later day even, goes on with the same cutoff and finishes the walk.
    clock.advance(days=3)
    assert RetentionWalk(pool, batches=SMALL).tick(clock.now()).completed
    with pool.connection() as conn:
        runs = _ids_of(conn, "runs")
        events = _ids_of(conn, "events")
        standing = read_standing(conn)
    assert runs == seeded.kept_runs
    assert not events & seeded.removed_events
    assert seeded.kept_events <= events
    assert standing.removed["runs"] == len(seeded.removed_runs)
    assert standing.removed["events"] == len(seeded.removed_events)


def test_a_tick_spends_at_most_its_transactions_and_the_walk_goes_on(
    pool: Pool, clock: ManualClock, history: History, make_org, make_agent
) -> None:
    agent_id, org_id = _ids(make_agent(make_org("Acme"), "web-01"))
    for days in range(EXPIRED, EXPIRED + 12):
        history.run(agent_id, org_id, days_ago=days, expect_removed=True)
    history.run(agent_id, org_id, days_ago=YOUNG, expect_removed=False)
    budget = RetentionBatches(rows=3, owners_per_step=2, transactions_per_tick=4, pause_seconds=0)
    walk = RetentionWalk(pool, batches=budget)
    ticks = []
    while not (tick := walk.tick(clock.now())).completed:
        assert tick.transactions <= budget.transactions_per_tick
        ticks.append(tick)
        assert len(ticks) < 50, "the walk does not progress"
    assert len(ticks) >= 2
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM runs").fetchone() == {"n": 1}


def test_a_completed_walk_waits_before_the_next(
    pool: Pool, clock: ManualClock, history: History, make_org, make_agent
) -> None:
    agent_id, org_id = _ids(make_agent(make_org("Acme"), "web-01"))
    history.run(agent_id, org_id, days_ago=YOUNG, expect_removed=False)
    walk = RetentionWalk(pool, batches=SMALL)
    assert walk.tick(clock.now()).completed
    history.run(agent_id, org_id, days_ago=EXPIRED, expect_removed=True)
    clock.advance(hours=1)
    assert walk.tick(clock.now()).transactions == 0
    clock.advance(seconds=SMALL.every.total_seconds())
    assert walk.tick(clock.now()).runs == 1


def test_the_reconcile_pass_runs_retention_and_metrics_show_it(
    pool: Pool,
    services: Services,
    clock: ManualClock,
    fleet: Fleet,
    history: History,
    make_org,
    make_agent,
) -> None:
    agent_id, org_id = _ids(make_agent(make_org("Acme"), "web-01"))
    history.run(agent_id, org_id, days_ago=EXPIRED, events=3, expect_removed=True)
    history.run(agent_id, org_id, days_ago=YOUNG, expect_removed=False)
    history.unreachable(agent_id, days_ago=EXPIRED)
    history.unreachable(agent_id, days_ago=EXPIRED + 1)
    history.unreachable(agent_id, days_ago=YOUNG)
    report = fleet.reconcile()
    assert report.retention.runs == 1
    assert report.retention.events == 3
    assert report.retention.unreachable_reports == 2
    assert report.retention.completed
    with pool.connection() as conn:
        trail = conn.execute(
            "SELECT actor_kind, actor_name, data FROM events WHERE kind = 'retention.completed'"
        ).fetchall()
    assert len(trail) == 1
    assert (trail[0]["actor_kind"], trail[0]["actor_name"]) == ("control_plane", "retention")
    assert trail[0]["data"]["removed"]["runs"] == 1
    assert trail[0]["data"]["removed"]["events"] == 3
    assert trail[0]["data"]["removed"]["unreachable_reports"] == 2
    text = render_metrics(services.metrics.snapshot(clock.now()))
    assert 'nachtwacht_retention_removed_rows_total{table="runs"} 1' in text
    assert 'nachtwacht_retention_removed_rows_total{table="events"} 3' in text
    assert 'nachtwacht_retention_removed_rows_total{table="unreachable_reports"} 2' in text
    assert (
        f"nachtwacht_retention_last_completed_timestamp_seconds {int(clock.now().timestamp())}"
        in text
    )


@pytest.mark.parametrize(
    "days",
    [
        pytest.param(0, id="keep_nothing"),
        pytest.param(-400, id="negative"),
        pytest.param(29, id="less_than_a_month"),
        pytest.param(3651, id="more_than_ten_years"),
        pytest.param(True, id="a_bool"),
        pytest.param("400", id="text"),
        pytest.param(400.5, id="fraction"),
    ],
)
def test_absurd_retention_is_refused_by_name(days: object) -> None:
    with pytest.raises(InvalidInput) as refused:
        PlatformSettings(retention_days=days)  # type: ignore[arg-type]
    message = str(refused.value)
    assert message.startswith("retention_days: ")
    assert "between 30 and 3650" in message or "not a whole number" in message


def test_the_database_refuses_an_absurd_retention_too(pool: Pool) -> None:
    with pool.connection() as conn, pytest.raises(psycopg.errors.CheckViolation):
        conn.execute("UPDATE platform_settings SET retention_days = 1")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        pytest.param("rows", 0, id="no_rows"),
        pytest.param("owners_per_step", -1, id="no_owners"),
        pytest.param("transactions_per_tick", 0, id="no_transactions"),
        pytest.param("transactions_per_tick", 3, id="too_few_to_move_on"),
        pytest.param("pause_seconds", -1.0, id="negative_pause"),
        pytest.param("every", timedelta(seconds=-1), id="negative_every"),
    ],
)
def test_batches_that_could_never_finish_are_refused(name: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=name):
        RetentionBatches(**{name: value})  # type: ignore[arg-type]


def test_the_smallest_budget_still_moves_the_walk_to_its_end(
    pool: Pool, clock: ManualClock, history: History, make_org, make_agent
) -> None:
    for index in range(5):
        agent_id, org_id = _ids(make_agent(make_org(f"Org {index}"), "web-01"))
        history.run(agent_id, org_id, days_ago=EXPIRED, expect_removed=True)
        history.run(agent_id, org_id, days_ago=YOUNG, expect_removed=False)
        history.notification(org_id, agent_id, days_ago=EXPIRED, expect_removed=True)
        history.refusal(agent_id, days_ago=EXPIRED)
    smallest = RetentionBatches(
        rows=3,
        owners_per_step=1,
        transactions_per_tick=MIN_TRANSACTIONS_PER_TICK,
        pause_seconds=0,
    )
    walk = RetentionWalk(pool, batches=smallest)
    for _ in range(200):
        if walk.tick(clock.now()).completed:
            break
    else:
        pytest.fail("the walk never completed: each tick started the same group again")
    with pool.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM notifications").fetchone() == {"n": 0}
