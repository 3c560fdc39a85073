"""The panel's history at 2,000 agents with a year: pages, an export, the versions per night.

Seeds (once, in `--data-dir`) an embedded PostgreSQL with one organisation of `--agents` agents
and `--days` nights of its history (`bench/year_of_history.py`: a scheduled run a night per agent,
its events, the trail), then calls the panel's service (`HistoryService`) on it directly, each
read `--repeat` times, and prints the medians:

- the organisation's runs and events, and one agent's: the newest page, and the page at the
  oldest end of the year reached by its (time, id) position; as the baseline, the same deep page
  read with OFFSET (what keyset paging replaces) — the ratio deep/newest says a page deep in the
  year costs what the first one does;
- the export of `--export-days` days of the organisation's runs and events, streamed through the
  server-side cursor: rows, seconds, rows a second, and how much this process's peak memory grew;
- the versions per night over 14 and 30 nights, read from the runs (no kept count).

    PYTHONPATH=. .venv/bin/python bench/history_pages.py --data-dir DIR [--agents 2000]
        [--days 365] [--repeat 7] [--export-days 92]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import psycopg
from psycopg.rows import dict_row

from bench.year_of_history import ZONE, History, fill_history, seed_fleet
from control_plane.database import open_pool
from control_plane.history import DayRange, HistoryQuery, HistoryService, Position
from control_plane.history.data import page_statement
from control_plane.panel.history import event_lines, run_lines
from nachtwacht.demo_world.databases import EmbeddedDatabase

DATABASE = "nachtwacht_history_pages"


def _generate(data_dir: Path, history: History) -> tuple[EmbeddedDatabase, str]:
    embedded = EmbeddedDatabase(data_dir)
    url = embedded.start()
    target = psycopg.conninfo.make_conninfo(url, dbname=DATABASE)
    with psycopg.connect(url, autocommit=True) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        if DATABASE not in existing:
            conn.execute(f'CREATE DATABASE "{DATABASE}" TEMPLATE "{conn.info.dbname}"')
            seed_fleet(target, history, data_dir / "releases")
            fill_history(target, history)
    return embedded, target


def _median_ms(read: Callable[[], object], repeat: int) -> float:
    read()  # once, not counted: caches and connections
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        read()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples) * 1000


def _ids(url: str) -> dict[str, Any]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        row = conn.execute(
            "SELECT a.org_id, a.id AS agent_id FROM agents a ORDER BY a.name LIMIT 1"
        ).fetchone()
        assert row is not None
        oldest = conn.execute(
            "SELECT min(created_at) AS runs, (SELECT min(at) FROM events) AS events FROM runs"
        ).fetchone()
        newest = conn.execute("SELECT max(created_at) AS at FROM runs").fetchone()
    assert oldest is not None and newest is not None
    return {
        **row,
        "oldest_run": oldest["runs"],
        "oldest_event": oldest["events"],
        "newest": newest["at"],
    }


def _offset_page(url: str, table: str, query: HistoryQuery, skip: int) -> Callable[[], object]:
    """The baseline: the page `skip` rows deep, by OFFSET over the same order and index."""
    statement, values = page_statement(
        "runs" if table == "runs" else "events",
        org_id=query.org_id,
        agent_id=query.agent_id,
        since=None,
        until=None,
        position=None,
        direction="older",
        limit=query.limit,
    )

    def read() -> object:
        with psycopg.connect(url) as conn:
            return conn.execute(statement + f" OFFSET {skip}", values).fetchall()

    return read


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--export-days", type=int, default=92)
    args = parser.parse_args(argv)
    history = History(agents=args.agents, orgs=1, days=args.days)
    embedded, url = _generate(args.data_dir, history)
    pool = open_pool(url, min_size=1, max_size=2)
    service = HistoryService(pool)
    ids = _ids(url)
    org, agent = ids["org_id"], ids["agent_id"]
    zone = ZoneInfo(ZONE)
    try:
        with psycopg.connect(url) as conn:
            counts = conn.execute(
                "SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM events)"
            ).fetchone()
        assert counts is not None
        print(f"{args.agents} agents, {args.days} nights: {counts[0]} runs, {counts[1]} events")
        print(f"{'median of ' + str(args.repeat):44} {'ms':>9}")
        for table, oldest in (("runs", ids["oldest_run"]), ("events", ids["oldest_event"])):
            for who, agent_id in (("organisation", None), ("agent", agent)):
                read: Callable[[HistoryQuery], object] = (
                    service.runs if table == "runs" else service.events
                )
                newest = HistoryQuery(org_id=org, agent_id=agent_id)
                # A position just after the oldest row: the year's last page.
                at = oldest + timedelta(hours=1)
                deep = HistoryQuery(
                    org_id=org,
                    agent_id=agent_id,
                    before=Position(at=at, id=_max_id(table)),
                )
                with psycopg.connect(url) as conn:
                    skip = _rows_newer_than(conn, table, org, agent_id, at)
                first_ms = _median_ms(lambda q=newest, r=read: r(q), args.repeat)
                deep_ms = _median_ms(lambda q=deep, r=read: r(q), args.repeat)
                offset_ms = _median_ms(_offset_page(url, table, deep, skip), args.repeat)
                label = f"{table} of the {who}"
                print(f"{label + ', newest page':44} {first_ms:9.1f}")
                print(
                    f"{label + f', page {skip:,} rows deep':44} {deep_ms:9.1f}"
                    f"   deep/newest {deep_ms / first_ms:5.2f}x"
                )
                print(
                    f"{label + ', same page by OFFSET':44} {offset_ms:9.1f}"
                    f"   offset/keyset {offset_ms / deep_ms:6.1f}x"
                )
        until = ids["newest"].astimezone(zone).date()
        since = until - timedelta(days=args.export_days - 1)
        export = HistoryQuery(
            org_id=org, days=DayRange(zone=zone, first=since, last=until), limit=1
        )
        for table, lines in (
            ("runs", lambda: run_lines(service.export_runs(export))),
            ("events", lambda: event_lines(service.export_events(export))),
        ):
            before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            began = time.perf_counter()
            rows = size = 0
            for line in lines():
                rows += 1
                size += len(line)
            seconds = time.perf_counter() - began
            grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_kb
            print(
                f"export of {args.export_days} days' {table}: {rows - 1:,} rows,"
                f" {size / 1e6:.1f} MB"
                f" in {seconds:.2f} s ({(rows - 1) / seconds:,.0f} rows/s);"
                f" peak memory grew {grew / 1024:.1f} MB"
            )
        now = ids["newest"] + timedelta(hours=8)
        fourteen = _median_ms(
            lambda: service.versions_per_night(org, nights=14, zone=zone, now=now), args.repeat
        )
        thirty = _median_ms(
            lambda: service.versions_per_night(org, nights=30, zone=zone, now=now), args.repeat
        )
        print(f"{'versions per night, 14 nights':44} {fourteen:9.1f}")
        print(
            f"{'versions per night, 30 nights':44} {thirty:9.1f}   30/14 {thirty / fourteen:.2f}x"
        )
    finally:
        pool.close()
        embedded.stop()
    return 0


def _max_id(table: str) -> Any:
    # The largest id of its kind: every row of the position's instant is older than it.
    return 2**62 if table == "events" else UUID(int=2**128 - 1)


def _rows_newer_than(
    conn: psycopg.Connection[Any], table: str, org: Any, agent: Any, at: datetime
) -> int:
    time_column = "created_at" if table == "runs" else "at"
    statement = f"SELECT count(*) FROM {table} WHERE org_id = %s AND {time_column} >= %s"  # noqa: S608 - constant names
    values: list[Any] = [org, at]
    if agent is not None:
        statement += " AND agent_id = %s"
        values.append(agent)
    row = conn.execute(statement, values).fetchone()
    assert row is not None
    return int(row[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
