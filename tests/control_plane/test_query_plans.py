"""History grows; its reads must not: every statement the product runs to read (or to decide on)
runs, events and notifications can be answered through an index, and `/metrics` reads none of
them.

A database is seeded with a small history by the benchmark's generator (`bench/year_of_history`),
analysed, and the product's own calls are made on it through a pool whose cursors record every
statement they run. Each statement is then explained (`EXPLAIN (FORMAT JSON)`, with its own
parameters) with sequential scans priced out (`enable_seqscan = off`): a plan that still reads a
history table sequentially has no index it can use, however big the table grows. Pricing them out
makes the check independent of the seeded size, at which a sequential scan of a small table may
well be the cheaper plan.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from bench.year_of_history import History, fill_history, seed_fleet
from control_plane.brake.spans import read_brake_spans
from control_plane.claims.manual import claim_manual
from control_plane.errors import ClaimRefused
from control_plane.events.services import EventFilter
from control_plane.metrics.services import MetricsService
from control_plane.reconcile import data
from control_plane.registry import Services, build_services
from control_plane.runs.views import latest_run_per_agent, latest_runs

HISTORY_TABLES = frozenset({"runs", "events", "notifications"})
# What `/metrics` counted per scrape before its figures were kept as rows were written.
COUNTED_TABLES = frozenset(
    {*HISTORY_TABLES, "tokens", "claim_refusals", "webhook_deliveries", "webhook_attempts"}
)
SMALL = History(agents=120, orgs=4, days=45)


@dataclass(frozen=True)
class Statement:
    query: Any  # str, or a psycopg.sql.Composable
    params: Any


class RecordingCursor(psycopg.Cursor[Any]):
    """Records what it runs in its connection's `recorded` list (when it has one)."""

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> RecordingCursor:  # type: ignore[override]
        recorded = getattr(self.connection, "recorded", None)
        if recorded is not None:
            recorded.append(Statement(query, params))
        super().execute(query, params, **kwargs)
        return self


class Recorder:
    """A pool of recording connections, and what they ran since `take()`."""

    def __init__(self, database_url: str) -> None:
        self.statements: list[Statement] = []
        self.pool: ConnectionPool[Any] = ConnectionPool(
            database_url,
            min_size=1,
            max_size=2,
            kwargs={"row_factory": dict_row, "autocommit": True, "cursor_factory": RecordingCursor},
            configure=self._attach,
            open=True,
        )

    def _attach(self, conn: psycopg.Connection[Any]) -> None:
        conn.recorded = self.statements  # type: ignore[attr-defined]

    def take(self) -> list[Statement]:
        taken = list(self.statements)
        self.statements.clear()
        return taken


@pytest.fixture(scope="module")
def seeded_url(postgres_admin_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One migrated database with a small history for the whole module (a few seconds)."""
    from control_plane import migrate
    from tests.conftest import _drop_database, _new_database, _with_dbname

    name = _new_database(postgres_admin_url)
    url = _with_dbname(postgres_admin_url, name)
    try:
        migrate.upgrade(url)
        workdir: Path = tmp_path_factory.mktemp("history")
        seed_fleet(url, SMALL, workdir)
        fill_history(url, SMALL, progress=False)
        yield url
    finally:
        _drop_database(postgres_admin_url, name)


@pytest.fixture(scope="module")
def recorder(seeded_url: str) -> Iterator[Recorder]:
    made = Recorder(seeded_url)
    yield made
    made.pool.close()


@pytest.fixture(scope="module")
def services(recorder: Recorder) -> Services:
    return build_services(recorder.pool)


@pytest.fixture(scope="module")
def world(seeded_url: str) -> dict[str, Any]:
    """Ids to ask about: an organisation, one of its agents, a panel credential, the last slot."""
    with psycopg.connect(seeded_url, row_factory=dict_row) as conn:
        agent = conn.execute(
            "SELECT a.id AS agent_id, a.org_id, c.id AS panel_id FROM agents a"
            " JOIN credentials c ON c.org_id = a.org_id AND c.audience = 'panel'"
            " ORDER BY a.name LIMIT 1"
        ).fetchone()
        slot = conn.execute(
            "SELECT slot_key, slot_at FROM runs WHERE trigger = 'schedule'"
            " ORDER BY slot_at DESC LIMIT 1"
        ).fetchone()
    assert agent is not None and slot is not None
    return {**agent, **slot}


def _plan_nodes(plan: dict[str, Any], under_limit: bool = False) -> Iterator[dict[str, Any]]:
    """Every node of a plan, each with `under_limit`: whether a Limit above it stops its reading."""
    yield {**plan, "under_limit": under_limit}
    for child in plan.get("Plans", ()):
        yield from _plan_nodes(child, under_limit or plan["Node Type"] == "Limit")


def explained(database_url: str, statement: Statement) -> list[dict[str, Any]]:
    """The nodes of a recorded statement's generic plan (the one a prepared statement settles
    on after a few runs, which cannot fold a filter that is absent into nothing), sequential
    scans priced out. Run once, prepared, in a transaction rolled back, to learn its text with
    its parameters as the server saw them."""
    with psycopg.connect(database_url) as conn, conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute(statement.query, statement.params, prepare=True)
        prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchone()
        assert prepared is not None
        row = conn.execute("EXPLAIN (GENERIC_PLAN, FORMAT JSON) " + prepared[0]).fetchone()
    assert row is not None
    return list(_plan_nodes(row[0][0]["Plan"]))


def _text(database_url: str, statement: Statement) -> str:
    query = statement.query
    if isinstance(query, sql.Composable):
        with psycopg.connect(database_url) as conn:
            return query.as_string(conn)
    return str(query)


_OPTIONAL = re.compile(r"\$\d+\)?(::[\w ]+)?\)? IS NULL|NOT \$\d+")
_OWNER_ONLY = re.compile(r"^\(\w+\.?(agent_id|org_id) = [^()]+\)$")


def unbounded_reads(
    database_url: str, statements: Sequence[Statement], tables: frozenset[str] = HISTORY_TABLES
) -> list[str]:
    """'table: how: statement' for every read of `tables` that grows with the history:
    - a sequential scan (sequential scans are priced out: there is no index it could use);
    - a filter on a parameter that may be absent (`$1 IS NULL OR col = $1`, `NOT $2 OR …`): the
      generic plan cannot drop it, so no index answers the column, and a LIMIT stops the walk
      only once enough rows matched (a rare match reads everything);
    - an index walked without a condition, filtering what it finds, with no LIMIT to stop it;
    - an index that narrows only to one agent's or organisation's rows (all of its history),
      filtering those, with no LIMIT to stop it."""
    found = []
    for statement in statements:
        for node in explained(database_url, statement):
            table = node.get("Relation Name")
            if table not in tables:
                continue
            how = None
            if node["Node Type"] == "Seq Scan":
                how = "read sequentially"
            elif _OPTIONAL.search(node.get("Filter", "")):
                how = f"filters on an optional parameter ({node['Filter']})"
            elif "Filter" in node and not node["under_limit"]:
                condition = node.get("Index Cond")
                if condition is None:
                    how = f"walks {node.get('Index Name')} whole, filtering"
                elif _OWNER_ONLY.match(condition):
                    how = f"reads an owner's whole history from {node.get('Index Name')}"
            if how:
                found.append(f"{table}: {how}: {_text(database_url, statement)}")
    return found


def _touching(statements: Sequence[Statement], database_url: str) -> list[Statement]:
    """The statements that name a history table (the others need no look)."""
    return [
        s
        for s in statements
        if any(f" {table}" in _text(database_url, s) for table in HISTORY_TABLES)
    ]


# -- the reads, as the product makes them ----------------------------------------------------------


def _trail_query(name: str, world: dict[str, Any]) -> EventFilter:
    at: datetime = world["slot_at"]
    return {
        "everything": EventFilter(),
        "org": EventFilter(org_id=world["org_id"]),
        "agent": EventFilter(agent_id=world["agent_id"]),
        "kind": EventFilter(kind="update.missed"),
        "family": EventFilter(kind="schedule."),
        "actor": EventFilter(actor_id=world["panel_id"]),
        "org_kind_since": EventFilter(
            org_id=world["org_id"], kind="update.failed", since=at - timedelta(days=7)
        ),
        "since_until": EventFilter(since=at - timedelta(days=2), until=at),
        "org_next_page": EventFilter(org_id=world["org_id"], before_id=1_000),
    }[name]


@pytest.mark.parametrize(
    "name",
    [
        "everything",
        "org",
        "agent",
        "kind",
        "family",
        "actor",
        "org_kind_since",
        "since_until",
        "org_next_page",
    ],
)
def test_the_operators_trail_reads_events_through_an_index(
    name: str, recorder: Recorder, services: Services, world: dict[str, Any], seeded_url: str
) -> None:
    query = _trail_query(name, world)
    recorder.take()
    services.events.trail(query)
    statements = recorder.take()
    assert statements, "the trail ran no statement"
    assert unbounded_reads(seeded_url, statements) == [], query


def test_an_agents_timeline_and_runs_read_through_indexes(
    recorder: Recorder, services: Services, world: dict[str, Any], seeded_url: str
) -> None:
    recorder.take()
    services.events.agent_events(world["org_id"], world["agent_id"])
    services.runs.agent_runs(world["org_id"], world["agent_id"])
    with recorder.pool.connection() as conn:
        latest_runs(conn, world["agent_id"], 20)
    assert unbounded_reads(seeded_url, _touching(recorder.take(), seeded_url)) == []


def test_the_latest_run_of_each_agent_is_read_per_agent_not_over_all_runs(
    recorder: Recorder, world: dict[str, Any], seeded_url: str
) -> None:
    recorder.take()
    with recorder.pool.connection() as conn:
        latest = latest_run_per_agent(conn, world["org_id"])
    assert latest, "the organisation's agents have runs"
    assert unbounded_reads(seeded_url, recorder.take()) == []


def test_an_organisations_summary_reads_each_agents_newest_run_through_an_index(
    recorder: Recorder, services: Services, world: dict[str, Any], seeded_url: str
) -> None:
    """The operators' page of one organisation counts its agents per state of the list: the
    failed and missed states look at each agent's newest run, never at the organisation's
    whole history."""
    at: datetime = world["slot_at"]
    recorder.take()
    summary = services.agents.org_summary(world["org_id"], now=at, online_since=at)
    assert summary.total > 0
    statements = _touching(recorder.take(), seeded_url)
    assert statements, "the summary read no runs"
    assert unbounded_reads(seeded_url, statements) == []


def test_the_task_tray_reads_the_manual_runs_through_an_index(
    recorder: Recorder, services: Services, world: dict[str, Any], seeded_url: str
) -> None:
    recorder.take()
    services.runs.operations(world["org_id"])
    assert unbounded_reads(seeded_url, recorder.take()) == []


@pytest.mark.parametrize("unread_only", [False, True], ids=["all", "unread"])
def test_notifications_are_read_through_an_index(
    unread_only: bool,
    recorder: Recorder,
    services: Services,
    world: dict[str, Any],
    seeded_url: str,
) -> None:
    recorder.take()
    services.notifications.list(world["org_id"], unread_only=unread_only, limit=50)
    assert unbounded_reads(seeded_url, recorder.take()) == []


def test_the_missed_slot_insert_looks_up_each_candidates_runs_by_index(
    recorder: Recorder, world: dict[str, Any], seeded_url: str
) -> None:
    with psycopg.connect(seeded_url, row_factory=dict_row) as conn:
        agents = conn.execute(
            "SELECT id, org_id FROM agents WHERE org_id = %s LIMIT 5", [world["org_id"]]
        ).fetchall()
    slot_at, candidates = _next_night(world, agents)
    recorder.take()
    with recorder.pool.connection() as conn, conn.transaction(force_rollback=True):
        missed = data.insert_missed(conn, candidates, now=slot_at + timedelta(minutes=20))
    assert len(missed) == len(candidates)
    assert unbounded_reads(seeded_url, recorder.take()) == []


def test_the_missed_slot_insert_asks_for_a_slots_runs_slot_first(
    recorder: Recorder, world: dict[str, Any], seeded_url: str
) -> None:
    """Whether the slot already has each candidate's run is read from the index that keeps a
    slot's runs side by side, not from each agent's pages of its own history."""
    with psycopg.connect(seeded_url, row_factory=dict_row) as conn:
        agents = conn.execute("SELECT id, org_id FROM agents").fetchall()
    slot_at, candidates = _next_night(world, agents)
    recorder.take()
    with recorder.pool.connection() as conn, conn.transaction(force_rollback=True):
        data.insert_missed(conn, candidates, now=slot_at + timedelta(minutes=20))
    [insert] = [s for s in recorder.take() if "NOT EXISTS" in str(s.query)]
    used = {
        node["Index Name"]
        for node in explained(seeded_url, insert)
        if node.get("Relation Name") == "runs" and "slot_key" in node.get("Index Cond", "")
    }
    assert used == {"runs_slot_agent"}, used


def test_the_brakes_spans_are_read_by_the_events_kind_not_over_the_trail(
    recorder: Recorder, seeded_url: str
) -> None:
    recorder.take()
    with recorder.pool.connection() as conn:
        read_brake_spans(conn, until=datetime.now(UTC))
    statements = recorder.take()
    assert statements, "the spans were read by no statement"
    assert unbounded_reads(seeded_url, statements) == []


def test_the_missed_slot_insert_counts_its_endings_once_per_statement(
    world: dict[str, Any], seeded_url: str
) -> None:
    """A night's misses are one statement of thousands of rows; a trigger run per row would
    upsert the same few counter rows thousands of times in one transaction, each walking every
    version written before it."""
    with psycopg.connect(seeded_url, row_factory=dict_row) as conn:
        agents = conn.execute("SELECT id, org_id FROM agents ORDER BY name").fetchall()
    slot_at, candidates = _next_night(world, agents)
    with psycopg.connect(seeded_url, row_factory=dict_row) as conn:
        unconsumed = conn.execute(
            data._UNCONSUMED,
            data.unconsumed_parameters(candidates, lambda _c: False, lambda _c: False),
        ).fetchall()
    with psycopg.connect(seeded_url) as conn, conn.transaction(force_rollback=True):
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + data._INSERT_MISSED,
            data.missed_parameters(unconsumed, slot_at + timedelta(minutes=20)),
        ).fetchone()
    assert row is not None
    calls = {trigger["Trigger Name"]: trigger["Calls"] for trigger in row[0][0]["Triggers"]}
    assert len(candidates) > 100
    assert {name: n for name, n in calls.items() if "count" in name and n > 1} == {}
    assert calls.get("runs_count_ending_inserted") == 1, calls


def test_the_per_slot_review_reads_one_slot_through_indexes(
    recorder: Recorder, world: dict[str, Any], seeded_url: str
) -> None:
    at: datetime = world["slot_at"]
    recorder.take()
    with recorder.pool.connection() as conn, conn.transaction(force_rollback=True):
        # The stamp that follows is by the runs' ids, read through their primary key (the
        # next test).
        data.pending_slots(conn, opened_before=at, stuck_before=at)
        data.slot_runs(conn, world["org_id"], at)
        data.stale_agents(conn, world["org_id"], stale_since=at - timedelta(days=3), day=at.date())
    assert unbounded_reads(seeded_url, _touching(recorder.take(), seeded_url)) == []


def test_a_reviewed_slot_stamps_the_runs_it_read_through_their_ids(
    world: dict[str, Any], seeded_url: str
) -> None:
    """On a review night the runs not yet considered are the fleet's whole night, which the
    statistics (gathered between nights, when almost none waits) do not know of: stamping one
    organisation's slot as considered reads that organisation's runs, never the fleet's."""
    with psycopg.connect(seeded_url, row_factory=dict_row) as conn:
        agents = conn.execute("SELECT id, org_id FROM agents ORDER BY name").fetchall()
    slot_at, candidates = _next_night(world, agents)
    org_id = candidates[0].org_id
    now = slot_at + timedelta(hours=2)
    with (
        psycopg.connect(seeded_url, row_factory=dict_row) as conn,
        conn.transaction(force_rollback=True),
    ):
        data.insert_missed(conn, candidates, now=now)
        run_ids = [row["run_id"] for row in data.slot_runs(conn, org_id, slot_at)]
        assert 0 < len(run_ids) < len(candidates) / 2, "the night holds other organisations' runs"
        row = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) " + data._MARK_RUNS_CONSIDERED,
            {"now": now, "run_ids": run_ids},
        ).fetchone()
    assert row is not None
    nodes = list(_plan_nodes(row["QUERY PLAN"][0]["Plan"]))
    scan = next(
        n for n in nodes if n.get("Relation Name") == "runs" and n["Node Type"] != "ModifyTable"
    )
    read = sum(scan.get(f, 0) for f in ("Actual Rows", "Rows Removed by Filter"))
    assert {n["Index Name"] for n in nodes if "Index Name" in n} == {"runs_pkey"}
    assert read == len(run_ids), scan


# -- /metrics --------------------------------------------------------------------------------------


def test_a_metrics_scrape_reads_no_history_table_but_the_runs_in_flight(
    recorder: Recorder, services: Services, seeded_url: str
) -> None:
    recorder.take()
    services.metrics.snapshot(datetime.now(UTC))
    statements = recorder.take()
    assert statements
    read = []
    for statement in statements:
        for node in explained(seeded_url, statement):
            table = node.get("Relation Name")
            if table in COUNTED_TABLES and node.get("Index Name") != "runs_in_flight":
                read.append(f"{table} ({node['Node Type']}): {_text(seeded_url, statement)}")
    assert read == []


def _full_counts(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """The figures as `/metrics` once counted them, from the rows themselves."""

    def grouped(statement: str) -> tuple[tuple[tuple[str], int], ...]:
        return tuple(((str(label),), int(n)) for label, n in conn.execute(statement))

    tokens = conn.execute("SELECT count(*) FROM tokens").fetchone()
    notifications = conn.execute("SELECT count(*) FROM notifications").fetchone()
    assert tokens is not None and notifications is not None
    return {
        "granted": tokens[0],
        "notifications": notifications[0],
        "refusal_facts": grouped(
            "SELECT reason, count(*) FROM claim_refusals GROUP BY reason ORDER BY reason"
        ),
        "deliveries": grouped(
            "SELECT state, count(*) FROM webhook_deliveries GROUP BY state ORDER BY state"
        ),
        "attempts": grouped(
            "SELECT outcome, count(*) FROM webhook_attempts GROUP BY outcome ORDER BY outcome"
        ),
    }


def _kept_counts(metrics: MetricsService) -> dict[str, Any]:
    snapshot = metrics.snapshot(datetime.now(UTC))
    return {
        "granted": snapshot.granted,
        "notifications": snapshot.notifications,
        "refusal_facts": snapshot.refusal_facts,
        "deliveries": snapshot.deliveries,
        "attempts": snapshot.attempts,
    }


# A mixed workload of the writes the kept figures follow: rows one at a time and many per
# statement, a duplicate refusal ignored, deliveries retried, delivered and failed.
_WORKLOAD = """
INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)
SELECT org_id, '2030-01-0' || g || 'T03:00', now(), now(), '{}'::jsonb
  FROM (SELECT org_id FROM webhooks LIMIT 1) w CROSS JOIN generate_series(1, 3) g;
INSERT INTO webhook_deliveries (notification_id, org_id, next_attempt_at)
SELECT id, org_id, now() FROM notifications WHERE slot_key LIKE '2030-%';
INSERT INTO webhook_attempts (notification_id, attempt, at, url, outcome)
SELECT notification_id, 1, now(), 'http://127.0.0.1:9/', 'retry'
  FROM webhook_deliveries WHERE state = 'pending';
UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now(), next_attempt_at = NULL
 WHERE notification_id = (SELECT min(notification_id::text)::uuid FROM webhook_deliveries
                           WHERE state = 'pending');
UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL
 WHERE notification_id = (SELECT min(notification_id::text)::uuid FROM webhook_deliveries
                           WHERE state = 'pending');
UPDATE webhook_deliveries SET attempts = attempts + 1 WHERE state = 'pending';
INSERT INTO claim_refusals (agent_id, slot_key, reason, first_at)
SELECT id, '2030-01-01T03:00', 'org_cap', now() FROM agents LIMIT 7;
INSERT INTO claim_refusals (agent_id, slot_key, reason, first_at)
SELECT id, '2030-01-01T03:00', 'org_cap', now() FROM agents LIMIT 9
ON CONFLICT DO NOTHING;
INSERT INTO tokens (run_id, agent_id, release_id, granted_at, expires_at)
SELECT r.id, r.agent_id, rel.id, now(), now() + interval '30 minutes'
  FROM runs r CROSS JOIN (SELECT id FROM releases LIMIT 1) rel
 WHERE r.status = 'up_to_date' LIMIT 4;
"""


def test_the_kept_figures_equal_a_full_count_after_a_mixed_workload(
    services: Services, seeded_url: str
) -> None:
    with psycopg.connect(seeded_url, autocommit=True) as conn:
        assert _kept_counts(services.metrics) == _full_counts(conn)
        conn.execute(_WORKLOAD)
        assert _kept_counts(services.metrics) == _full_counts(conn)


def test_removing_old_rows_lowers_no_kept_figure(database_url: str, tmp_path: Path) -> None:
    tiny = History(agents=20, orgs=2, days=20)
    seed_fleet(database_url, tiny, tmp_path)
    fill_history(database_url, tiny, progress=False)
    pool: ConnectionPool[Any] = ConnectionPool(
        database_url,
        min_size=1,
        max_size=1,
        kwargs={"row_factory": dict_row, "autocommit": True},
        open=True,
    )
    try:
        metrics = build_services(pool).metrics
        before = _kept_counts(metrics)
        assert before["granted"] and before["notifications"] and before["refusal_facts"]
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("DELETE FROM notifications")
            conn.execute("DELETE FROM runs")
            conn.execute("DELETE FROM claim_refusals")
        assert _kept_counts(metrics) == before
    finally:
        pool.close()


def test_the_generated_history_holds_every_foreign_key(seeded_url: str) -> None:
    """The generator writes with triggers off, so foreign keys are not checked as it writes."""
    with psycopg.connect(seeded_url) as conn:
        keys = conn.execute(
            "SELECT conrelid::regclass::text, confrelid::regclass::text,"
            " (SELECT array_agg(attname ORDER BY k.n) FROM unnest(conkey) WITH ORDINALITY"
            "   AS k(num, n) JOIN pg_attribute ON attrelid = conrelid AND attnum = k.num),"
            " (SELECT array_agg(attname ORDER BY k.n) FROM unnest(confkey) WITH ORDINALITY"
            "   AS k(num, n) JOIN pg_attribute ON attrelid = confrelid AND attnum = k.num)"
            " FROM pg_constraint WHERE contype = 'f'"
        ).fetchall()
        broken = []
        for table, target, columns, target_columns in keys:
            matches = " AND ".join(
                f"t.{tc} = s.{c}" for c, tc in zip(columns, target_columns, strict=True)
            )
            present = " AND ".join(f"s.{c} IS NOT NULL" for c in columns)
            row = conn.execute(
                f"SELECT count(*) FROM {table} s WHERE {present}"  # noqa: S608 - catalog names
                f" AND NOT EXISTS (SELECT 1 FROM {target} t WHERE {matches})"
            ).fetchone()
            assert row is not None
            if row[0]:
                broken.append(f"{table}({', '.join(columns)}) -> {target}: {row[0]}")
    assert broken == []


def test_a_manual_claims_reads_find_its_run_by_index(
    recorder: Recorder, world: dict[str, Any], seeded_url: str
) -> None:
    # Every agent of a bulk update now asks again each minute while its round is full: the
    # early read of the round (`claims.manual`) and the claim's own read find the run by its id.
    recorder.take()
    with pytest.raises(ClaimRefused):
        claim_manual(
            recorder.pool,
            world["agent_id"],
            uuid4(),
            None,
            datetime(2026, 11, 30, 14, 7, tzinfo=UTC),
        )
    tables = frozenset({*HISTORY_TABLES, "tokens"})
    statements = recorder.take()
    assert any("claim_rounds_org" in str(s.query) for s in statements)
    assert unbounded_reads(seeded_url, statements, tables) == []


def _next_night(
    world: dict[str, Any], agents: list[dict[str, Any]]
) -> tuple[datetime, list[data.SlotCandidate]]:
    """The slot after the history's last (no run has it yet), missed by each of `agents`."""
    slot_at: datetime = world["slot_at"] + timedelta(days=1)
    return slot_at, [
        data.SlotCandidate(
            agent_id=a["id"],
            org_id=a["org_id"],
            slot_key=(slot_at + timedelta(hours=1)).strftime("%Y-%m-%dT03:00"),
            slot_at=slot_at,
            window_closes=slot_at + timedelta(minutes=15),
        )
        for a in agents
    ]
