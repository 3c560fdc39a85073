"""What history costs on disk, and what removing it costs: bytes per row, a year and two, a walk.

1. Seeds a migrated embedded PostgreSQL with `--days` nights of history for `--agents` agents in
   `--orgs` organisations, shaped as the product writes it: every agent has one scheduled run a
   night (85 % up to date, 8 % updated, 2 % failed, 1 % rolled back, 4 % missed with a reason),
   an updated or failed run its token and two events (`update.scheduled` and its ending), the
   others one; every organisation one notification a night (the summary's body with the failed
   and missed agents named) with its slot review, a webhook delivery and attempt for one
   organisation in five, an agent mention per failed agent; the claim refusals and round
   counters of the night.
2. Measures every table with its indexes and TOAST (`pg_total_relation_size` after VACUUM) and
   prints the bytes per row, then what that makes for 10,000 agents in 250 organisations with
   one and with two slots a night: after a year, after two years with nothing removed, and after
   two years (or any time from day 400 on) with the default `retention_days` of 400.
3. Copies the database twice and removes the same expired rows (`--days` minus 400 nights' worth
   when `--days` > 400, else everything older than `--expire-days`) two ways: the retention walk
   as the worker runs it (bounded transactions; no pause here, so the figure is its own work) and,
   as the baseline, one `DELETE` per table in one transaction. Prints both durations, the walk's
   transactions (count, median and longest), and the ratio of its longest transaction to the one
   big one: the lock and vacuum horizon the walk holds at worst, against what a plain DELETE holds.

    PYTHONPATH=. .venv/bin/python bench/retention.py [--agents 2000] [--orgs 50] [--days 60]
        [--expire-days 30] [--rows 2000]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from bench.herd import seed
from control_plane.database import open_pool
from control_plane.retention import RetentionBatches, RetentionWalk
from control_plane.settings.services import DEFAULT_RETENTION_DAYS
from nachtwacht.demo_world.databases import EmbeddedDatabase

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
FLEET_AGENTS = 10_000
FLEET_ORGS = 250
GIB = 1024**3

_RUNS = """
INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason, release_id,
                  from_version, version, outcome_reason, created_at, claimed_at, finished_at,
                  notify_considered_at)
SELECT a.id, a.org_id, 'schedule', to_char(s.at AT TIME ZONE 'Europe/Amsterdam',
       'YYYY-MM-DD"T"HH24:MI'), s.at, s.status,
       CASE WHEN s.status = 'missed'
            THEN (ARRAY['offline', 'throttled', 'unknown', 'unreachable'])[1 + s.k %% 4] END,
       CASE WHEN s.status IN ('succeeded', 'failed', 'rolled_back') THEN r.id END,
       '1.4.1',
       CASE WHEN s.status IN ('succeeded', 'up_to_date') THEN '1.5.0'
            WHEN s.status IN ('failed', 'rolled_back') THEN '1.4.1' END,
       CASE WHEN s.status = 'failed' THEN 'health_check_failed'
            WHEN s.status = 'rolled_back' THEN 'health_check_failed' END,
       s.at + interval '40 seconds',
       CASE WHEN s.status IN ('succeeded', 'failed', 'rolled_back') THEN s.at + interval '40 s'
       END,
       s.at + interval '4 minutes', s.at + interval '20 minutes'
  FROM agents a
 CROSS JOIN generate_series(1, %(days)s) AS g(age)
 CROSS JOIN (SELECT id FROM releases ORDER BY manifest_version LIMIT 1) r
 CROSS JOIN LATERAL (
        SELECT date_trunc('day', %(now)s::timestamptz) + interval '2 hours'
                 - make_interval(days => g.age) AS at,
               abs(hashtext(a.id::text || g.age::text)) %% 100 AS k
       ) h
 CROSS JOIN LATERAL (
        SELECT h.at, h.k,
               CASE WHEN h.k < 85 THEN 'up_to_date' WHEN h.k < 93 THEN 'succeeded'
                    WHEN h.k < 95 THEN 'failed' WHEN h.k < 96 THEN 'rolled_back'
                    ELSE 'missed' END AS status
       ) s
"""

_TOKENS = """
INSERT INTO tokens (run_id, agent_id, release_id, round_start, granted_at, expires_at)
SELECT id, agent_id, release_id, date_trunc('minute', claimed_at), claimed_at,
       claimed_at + interval '60 minutes'
  FROM runs WHERE release_id IS NOT NULL
"""

_EVENTS = """
INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)
SELECT org_id, agent_id, id, 'update.scheduled', 'schedule', claimed_at,
       jsonb_build_object('slot_key', slot_key, 'from_version', from_version,
                          'to_version', '1.5.0', 'renewed', false)
  FROM runs WHERE release_id IS NOT NULL
UNION ALL
SELECT org_id, agent_id, id, 'update.' || status, CASE WHEN status = 'missed' THEN 'schedule'
       WHEN status = 'up_to_date' THEN 'schedule' ELSE 'agent' END, finished_at,
       CASE status
         WHEN 'missed' THEN jsonb_build_object('slot_key', slot_key, 'reason', miss_reason)
         WHEN 'up_to_date' THEN jsonb_build_object('slot_key', slot_key, 'version', version)
         ELSE jsonb_build_object('version', version, 'error', NULL, 'reason', outcome_reason,
                                 'switched_at', to_char(finished_at, 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))
       END
  FROM runs
"""

_NOTIFICATIONS = """
INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)
SELECT r.org_id, r.slot_key, r.slot_at, r.slot_at + interval '20 minutes',
       jsonb_build_object(
         'kind', 'scheduled_updates',
         'slot', jsonb_build_object('key', r.slot_key, 'at', r.slot_at,
                                    'local_time', r.slot_at, 'timezone', 'Europe/Amsterdam'),
         'counts', jsonb_build_object(
            'agents', count(*), 'updated', count(*) FILTER (WHERE status = 'succeeded'),
            'up_to_date', count(*) FILTER (WHERE status = 'up_to_date'),
            'failed', count(*) FILTER (WHERE status = 'failed'),
            'rolled_back', count(*) FILTER (WHERE status = 'rolled_back'),
            'missed', count(*) FILTER (WHERE status = 'missed'), 'no_outcome', 0,
            'unauthorised', 0, 'skipped', 0),
         'updated', jsonb_build_array(jsonb_build_object(
            'version', '1.5.0', 'count', count(*) FILTER (WHERE status = 'succeeded'))),
         'failed', coalesce(jsonb_agg(jsonb_build_object(
            'agent_id', a.id, 'name', a.name, 'status', r.status, 'version', r.version,
            'reason', r.outcome_reason, 'error', NULL))
            FILTER (WHERE r.status IN ('failed', 'rolled_back')), '[]'),
         'failures_already_reported_today', 0,
         'missed', coalesce(jsonb_agg(jsonb_build_object(
            'agent_id', a.id, 'name', a.name, 'reason', r.miss_reason))
            FILTER (WHERE r.status = 'missed'), '[]'),
         'no_outcome', '[]'::jsonb, 'not_updated_for_three_days', '[]'::jsonb,
         'summary', 'updates of the night: some updated, some failed, some missed')
  FROM runs r JOIN agents a ON a.id = r.agent_id
 GROUP BY r.org_id, r.slot_key, r.slot_at
"""

_AROUND_NOTIFICATIONS = [
    """
    INSERT INTO slot_reviews (org_id, slot_key, slot_at, decided_at, notification_id)
    SELECT org_id, slot_key, slot_at, created_at, id FROM notifications
    """,
    """
    INSERT INTO webhook_deliveries (notification_id, org_id, state, attempts, delivered_at)
    SELECT id, org_id, 'delivered', 1, created_at + interval '2 seconds' FROM notifications
     WHERE abs(hashtext(org_id::text)) % 5 = 0
    """,
    """
    INSERT INTO webhook_attempts (notification_id, attempt, at, url, status_code, outcome)
    SELECT notification_id, 1, delivered_at, 'https://hooks.example.com/nachtwacht', 200,
           'delivered'
      FROM webhook_deliveries
    """,
    """
    INSERT INTO agent_mentions (agent_id, local_day, kind, notification_id)
    SELECT r.agent_id, (r.slot_at AT TIME ZONE 'Europe/Amsterdam')::date, 'failure', n.id
      FROM runs r JOIN notifications n ON n.org_id = r.org_id AND n.slot_key = r.slot_key
     WHERE r.status IN ('failed', 'rolled_back')
    ON CONFLICT DO NOTHING
    """,
    """
    INSERT INTO claim_refusals (agent_id, slot_key, reason, first_at)
    SELECT agent_id, slot_key, 'org_cap', slot_at + interval '10 seconds' FROM runs
     WHERE abs(hashtext(id::text)) % 100 < 3
    """,
    """
    INSERT INTO unreachable_reports (agent_id, slot_key, slot_at, error, first_tried_at,
                                     last_tried_at, attempts, reported_at)
    SELECT agent_id, slot_key, slot_at,
           'connect to cp.example.com port 443: no route to host (proxy.example.com:3128)',
           slot_at + interval '10 seconds', slot_at + interval '55 minutes', 56,
           slot_at + interval '3 hours'
      FROM runs WHERE miss_reason = 'unreachable'
    """,
    """
    INSERT INTO claim_rounds_org (round_start, org_id, granted)
    SELECT date_trunc('minute', claimed_at), org_id, least(count(*), 5)
      FROM runs WHERE claimed_at IS NOT NULL GROUP BY 1, 2
    """,
    """
    INSERT INTO claim_rounds_global (round_start, granted)
    SELECT round_start, sum(granted) FROM claim_rounds_org GROUP BY 1
    """,
]

# The tables a night writes, and the names they are reported by.
HISTORY_TABLES = (
    "runs",
    "events",
    "tokens",
    "notifications",
    "slot_reviews",
    "webhook_deliveries",
    "webhook_attempts",
    "agent_mentions",
    "claim_refusals",
    "unreachable_reports",
    "claim_rounds_org",
    "claim_rounds_global",
)


def seed_history(url: str, days: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        # Set-based and without the change feed's and the counters' triggers: a bench database.
        conn.execute("SET session_replication_role = replica")
        started = time.perf_counter()
        conn.execute(_RUNS, {"days": days, "now": NOW})
        conn.execute(_TOKENS)
        conn.execute(_EVENTS)
        conn.execute(_NOTIFICATIONS)
        for statement in _AROUND_NOTIFICATIONS:
            conn.execute(statement)
        conn.execute("VACUUM ANALYZE")
        print(f"seeded {days} nights in {time.perf_counter() - started:.1f} s", flush=True)


def measure(url: str) -> dict[str, tuple[int, int]]:
    """Rows and bytes (table, indexes, TOAST) of every history table."""
    sizes: dict[str, tuple[int, int]] = {}
    with psycopg.connect(url) as conn:
        for table in HISTORY_TABLES:
            row = conn.execute(
                f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}"  # noqa: S608
            ).fetchone()
            assert row is not None
            sizes[table] = (int(row[0]), int(row[1]))
    return sizes


def per_night_of_fleet(
    sizes: dict[str, tuple[int, int]], agents: int, orgs: int, days: int
) -> float:
    """Bytes one night adds for the 10,000-agent fleet: each table's bytes per row times its
    rows per night, scaled from this fleet (per agent or per organisation) to that one."""
    per_org_tables = {"notifications", "slot_reviews", "webhook_deliveries", "webhook_attempts"}
    total = 0.0
    for table, (rows, size) in sizes.items():
        if rows == 0:
            continue
        per_row = size / rows
        rows_per_night = rows / days
        scale = FLEET_ORGS / orgs if table in per_org_tables else FLEET_AGENTS / agents
        if table == "claim_rounds_global":
            scale = 1.0
        total += per_row * rows_per_night * scale
    return total


def _with_name(url: str, name: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo("", **params)


def _copy(url: str, name: str) -> str:
    source = conninfo_to_dict(url)["dbname"]
    with psycopg.connect(_with_name(url, "postgres"), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid()",
            [source],
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
    return _with_name(url, name)


def history_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        # The walk's own record of its completion is not history.
        counted = " + ".join(
            f"(SELECT count(*) FROM {table}"  # noqa: S608 - the tables' names
            + (" WHERE kind <> 'retention.completed')" if table == "events" else ")")
            for table in HISTORY_TABLES
        )
        row = conn.execute(f"SELECT {counted}").fetchone()
    assert row is not None
    return int(row[0])


def one_big_delete(url: str, cutoff: datetime) -> float:
    """The baseline: every expired row in one transaction (runs' events, tokens and the rest by
    their foreign keys), as a plain `DELETE ... WHERE created_at < cutoff` would."""
    with psycopg.connect(url) as conn:
        started = time.perf_counter()
        with conn.transaction():
            conn.execute("DELETE FROM runs WHERE created_at < %s", [cutoff])
            conn.execute("DELETE FROM notifications WHERE created_at < %s", [cutoff])
            conn.execute("DELETE FROM claim_refusals WHERE first_at < %s", [cutoff])
            conn.execute("DELETE FROM unreachable_reports WHERE slot_at < %s", [cutoff])
            conn.execute("DELETE FROM slot_reviews WHERE slot_at < %s", [cutoff])
            conn.execute("DELETE FROM claim_rounds_org WHERE round_start < %s", [cutoff])
            conn.execute("DELETE FROM claim_rounds_global WHERE round_start < %s", [cutoff])
        return time.perf_counter() - started


def the_walk(url: str, retention_days: int, rows: int) -> tuple[float, list[float], int]:
    """The worker's walk to its end, no pause: total seconds, each transaction's seconds (the
    time between two of its pauses), rows removed."""
    stamps: list[float] = []
    pool = open_pool(url, min_size=1, max_size=2)
    try:
        with pool.connection() as conn:
            conn.execute("UPDATE platform_settings SET retention_days = %s", [retention_days])
        batches = RetentionBatches(
            rows=rows, transactions_per_tick=10**9, pause_seconds=1e-9, every=timedelta(0)
        )
        walk = RetentionWalk(
            pool, batches=batches, sleep=lambda _s: stamps.append(time.perf_counter())
        )
        started = time.perf_counter()
        stamps.append(started)
        tick = walk.tick(NOW)
        ended = time.perf_counter()
        stamps.append(ended)
        assert tick.completed
    finally:
        pool.close()
    return ended - started, [b - a for a, b in itertools.pairwise(stamps)], tick.removed


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--orgs", type=int, default=50)
    parser.add_argument("--days", type=int, default=60, help="nights of history to seed")
    parser.add_argument(
        "--expire-days",
        type=int,
        default=30,
        help="the retention the walk and the baseline apply (at least 30, as the setting)",
    )
    parser.add_argument("--rows", type=int, default=RetentionBatches().rows)
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="nachtwacht-bench-retention-") as workdir:
        home = Path(workdir)
        home.chmod(0o755)
        database = EmbeddedDatabase(home / "pg")
        url = database.start()
        try:
            started = time.perf_counter()
            seed(url, args.agents, args.orgs, home)
            print(
                f"{args.agents} agents in {args.orgs} organisations in "
                f"{time.perf_counter() - started:.1f} s",
                flush=True,
            )
            seed_history(url, args.days)
            sizes = measure(url)
            report_sizes(sizes, args.agents, args.orgs, args.days)
            measure_removal(url, args)
        finally:
            database.stop()
    return 0


def report_sizes(sizes: dict[str, tuple[int, int]], agents: int, orgs: int, days: int) -> None:
    print(f"\nbytes per row (table + indexes + TOAST), {days} nights of {agents} agents:")
    print(f"  {'table':22} {'rows':>10} {'MiB':>9} {'bytes/row':>10}")
    for table, (rows, size) in sizes.items():
        per_row = size / rows if rows else 0.0
        print(f"  {table:22} {rows:>10} {size / 2**20:>9.1f} {per_row:>10.0f}")
    night = per_night_of_fleet(sizes, agents, orgs, days)
    print(f"\n{FLEET_AGENTS:,} agents in {FLEET_ORGS} organisations (history tables only):")
    print(
        f"  {'slots/night':>11} {'per night MiB':>14} {'1 year GiB':>11} "
        f"{'2 years, none removed':>22} {'2 years, retention 400 d':>25}"
    )
    for slots in (1, 2):
        per_night = night * slots
        print(
            f"  {slots:>11} {per_night / 2**20:>14.1f} {per_night * 365 / GIB:>11.2f} "
            f"{per_night * 730 / GIB:>22.2f} "
            f"{per_night * DEFAULT_RETENTION_DAYS / GIB:>25.2f}"
        )


def measure_removal(url: str, args: argparse.Namespace) -> None:
    cutoff = NOW - timedelta(days=args.expire_days)
    baseline_url = _copy(url, "bench_one_delete")
    walk_url = _copy(url, "bench_walk")
    before = history_rows(url)
    one_seconds = one_big_delete(baseline_url, cutoff)
    one_removed = before - history_rows(baseline_url)
    walk_seconds, transactions, _ = the_walk(walk_url, args.expire_days, args.rows)
    walk_removed = before - history_rows(walk_url)
    longest = max(transactions)
    defaults = RetentionBatches()
    print(
        f"\nremoving everything older than {args.expire_days} days "
        f"({args.days - args.expire_days} nights), rows of every history table:"
    )
    print(
        f"  baseline, one DELETE per table in one transaction: {one_removed:>9} rows "
        f"in {one_seconds:6.2f} s (one transaction of {one_seconds * 1000:.0f} ms)"
    )
    print(
        f"  the retention walk, {args.rows} rows per transaction: {walk_removed:>9} rows "
        f"in {walk_seconds:6.2f} s ({len(transactions)} transactions, median "
        f"{statistics.median(transactions) * 1000:.0f} ms, longest {longest * 1000:.0f} ms)"
    )
    print(
        f"  walk / baseline: total time {walk_seconds / one_seconds:.2f}x, "
        f"longest transaction {longest / one_seconds:.3f}x"
    )
    per_minute = 2 * defaults.transactions_per_tick * defaults.rows
    print(
        f"  the walk's own rate: {walk_removed / walk_seconds:,.0f} rows/s; in the worker (a tick "
        f"every 30 s, {defaults.transactions_per_tick} transactions of at most {defaults.rows} "
        f"rows, {defaults.pause_seconds} s apart) at most {per_minute:,} rows a minute"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
