"""The customer's panel for a hoster of 2,000 agents with a year of history: its median reads.

One organisation of `--agents` agents (2,000) and `--days` nights of history (365), written by
`bench/year_of_history.py` (`seed_fleet`, then `fill_history`: every night's scheduled run of
each kind, manual runs, their events, the nightly reviews and their notifications, the trail),
plus a pin on one agent in a hundred. Then `nachtwacht control serve` (one worker), on a clock
at noon after the last night, and each read `--repeats` times in turn (one warm-up turn first,
not counted):

    baseline         /healthz, read in the same turns
    agent list       /panel/agents (unfiltered, first page), the same filtered by state:
                     failed, pinned, not on the offered release (the offer rule over all 2,000),
                     searched and sorted by version, and a later page
    one agent        /panel/agents/{id}: its schedule, next nights, runs, timeline, offer
    notifications    /panel/notifications

It prints each read's median, min and max, its ratio to the baseline's median, the client's
CPU, the machine's load, and whether each holds the target: under 100 ms at the median
(`bench/median_reads.py`). Then, without a target, the bulk actions over every agent of the
list, `--bulk-repeats` times each, their median:

    over HTTP        a hold of every agent of the view (one change per agent on the trail),
                     then its end: the whole request, the page it answers with included
    in the database  the same hold's statements in one transaction, rolled back: set-based as
                     the product runs them, and — the same run's baseline — one agent at a time
                     (`set_hold` per agent, as the bulk hold ran before it was set-based)

    PYTHONPATH=. .venv/bin/python bench/panel_scale.py [--agents 2000] [--days 365]
        [--repeats 9] [--bulk-repeats 5]
        [--data-dir DIR (keeps the generated database for the next run)]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from datetime import time as wall_time
from pathlib import Path
from uuid import UUID

import httpx
import psycopg

from bench.median_reads import Read, csrf_of, measure, report, signed_in
from bench.year_of_history import History, fill_history, panel_key, seed_fleet
from control_plane.agents.agent_list import PAGE_SIZE
from control_plane.events.trail import Actor
from control_plane.pins.holds import set_hold, set_holds
from nachtwacht.demo_world.children import stop_process
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase

TARGET_MS = 100.0
DATABASE = "nachtwacht_panel_scale"


def generate(url: str, history: History, workdir: Path) -> str:
    """The organisation and its year in a database of its own (made once per data directory)."""
    target = psycopg.conninfo.make_conninfo(url, dbname=DATABASE)
    with psycopg.connect(url, autocommit=True) as conn:
        known = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone()
        if known is not None:
            return target
        conn.execute(f'CREATE DATABASE "{DATABASE}" TEMPLATE "{conn.info.dbname}"')
    started = time.perf_counter()
    seed_fleet(target, history, workdir)
    fill_history(target, history, progress=False)
    with psycopg.connect(target) as conn:
        # One agent in a hundred pinned to the version it runs: the "pinned" filter's rows.
        conn.execute(
            "INSERT INTO pins (agent_id, version, reason, set_at, set_by)"
            " SELECT id, NULL, 'bench', now(), 'bench' FROM agents WHERE name LIKE '%%00'"
        )
        conn.execute("ANALYZE")
    print(f"generated in {time.perf_counter() - started:.0f} s", flush=True)
    return target


def reads(
    plane: RunningControlPlane, agent: UUID, agents: int
) -> tuple[list[Read], list[httpx.Client]]:
    """The reads in their order, and the clients to close. The deep page is three quarters down
    the list (page 30 of 40 at 2,000 agents)."""
    panel = signed_in(plane.base_url, panel_key(0))
    bare = httpx.Client(base_url=plane.base_url, timeout=120)

    deep = max(1, -(-agents // PAGE_SIZE) * 3 // 4)

    def on(client: httpx.Client, path: str, **params: str) -> Callable[[], httpx.Response]:
        return lambda: client.get(path, params=params)

    listed = [
        Read(label="baseline /healthz", get=on(bare, "/healthz"), target_ms=TARGET_MS),
        Read(label="agents", get=on(panel, "/panel/agents"), target_ms=TARGET_MS),
        Read(
            label="agents state=failed",
            get=on(panel, "/panel/agents", state="failed"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="agents state=pinned",
            get=on(panel, "/panel/agents", state="pinned"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="agents state=behind",
            get=on(panel, "/panel/agents", state="behind"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="agents q=agent-01 sort=-version",
            get=on(panel, "/panel/agents", q="agent-01", sort="-version"),
            target_ms=TARGET_MS,
        ),
        Read(
            label=f"agents page={deep} sort=-seen",
            get=on(panel, "/panel/agents", page=str(deep), sort="-seen"),
            target_ms=TARGET_MS,
        ),
        Read(label="agent page", get=on(panel, f"/panel/agents/{agent}"), target_ms=TARGET_MS),
        Read(label="notifications", get=on(panel, "/panel/notifications"), target_ms=TARGET_MS),
    ]
    return listed, [panel, bare]


def bulk_over_http(plane: RunningControlPlane, agents: int, until: str, repeats: int) -> None:
    """A hold of every agent of the list, then its end (one request, one transaction each),
    `repeats` times: the median of each."""
    panel = signed_in(plane.base_url, panel_key(0))
    times: dict[str, list[float]] = {"hold": [], "release": []}
    try:
        for _ in range(repeats):
            for action in times:
                csrf = csrf_of(panel.get("/panel/agents").text)
                started = time.perf_counter()
                answer = panel.post(
                    "/panel/agents/bulk",
                    data={
                        "csrf": csrf,
                        "action": action,
                        "target": "matching",
                        "count": str(agents),
                        "until": until,
                        "reason": "bench",
                    },
                )
                times[action].append((time.perf_counter() - started) * 1000)
                if answer.status_code != 200:
                    raise SystemExit(f"bulk {action}: answered {answer.status_code}")
    finally:
        panel.close()
    for action, taken in times.items():
        print(
            f"bulk {action:8} of all {agents} agents over HTTP: {statistics.median(taken):8.0f} ms"
            f" median of {repeats} (min {min(taken):.0f}, max {max(taken):.0f})"
        )


def bulk_in_the_database(url: str, now: datetime, repeats: int) -> None:
    """The hold's statements for every agent in one transaction, rolled back: set-based, and
    one agent at a time (the same run's baseline), taking turns; the median of each."""
    actor = Actor(kind="user", name="bench")
    until = now + timedelta(days=7)
    times: dict[str, list[float]] = {"one agent at a time": [], "set-based": []}
    with psycopg.connect(url, row_factory=psycopg.rows.dict_row) as conn:
        org_id, agent_ids = _the_organisation(conn)
        conn.rollback()
        for _ in range(repeats):
            for way in times:
                started = time.perf_counter()
                with conn.transaction(force_rollback=True):
                    if way == "set-based":
                        set_holds(
                            conn,
                            org_id=org_id,
                            agent_ids=agent_ids,
                            until=until,
                            reason="bench",
                            set_by="customer",
                            actor=actor,
                            now=now,
                        )
                    else:
                        for agent_id in agent_ids:
                            set_hold(
                                conn,
                                org_id=org_id,
                                agent_id=agent_id,
                                until=until,
                                reason="bench",
                                set_by="customer",
                                actor=actor,
                                now=now,
                            )
                times[way].append((time.perf_counter() - started) * 1000)
    baseline = statistics.median(times["one agent at a time"])
    for way, taken in times.items():
        median = statistics.median(taken)
        print(
            f"hold of {len(agent_ids)} agents in the database, {way:19}: {median:8.0f} ms"
            f" median of {repeats} (min {min(taken):.0f}, max {max(taken):.0f});"
            f" {median / baseline:.2f} x one agent at a time"
        )


def _the_organisation(conn: psycopg.Connection[dict[str, object]]) -> tuple[UUID, list[UUID]]:
    rows = conn.execute(
        "SELECT org_id, id FROM agents WHERE deleted_at IS NULL ORDER BY id"
    ).fetchall()
    orgs = {row["org_id"] for row in rows}
    assert len(orgs) == 1, "the bench's database holds one organisation"
    return UUID(str(orgs.pop())), [UUID(str(row["id"])) for row in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=2_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--bulk-repeats", type=int, default=5)
    parser.add_argument("--data-dir", type=Path)
    options = parser.parse_args()
    history = History(agents=options.agents, orgs=1, days=options.days)
    with tempfile.TemporaryDirectory(prefix="nachtwacht-panel-scale-") as scratch:
        home = options.data_dir or Path(scratch)
        home.mkdir(parents=True, exist_ok=True)
        database = EmbeddedDatabase(home / "pg")
        plane: RunningControlPlane | None = None
        try:
            url = generate(database.start(), history, home / "releases")
            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT id FROM agents ORDER BY name OFFSET %s LIMIT 1", [
                    options.agents // 2
                ]).fetchone()  # fmt: skip
            assert row is not None
            noon = datetime.combine(history.until, wall_time(11, 0)).isoformat() + "Z"
            plane = start_control_plane(
                stderr_path=home / "serve.log",
                database_url=url,
                fake_clock=f"{noon},anchor={time.time()},speed=1",
                args=[],  # a data dir kept from an older release is migrated first
            )
            listed, clients = reads(plane, row[0], options.agents)
            cpu_before = time.process_time()
            wall_before = time.perf_counter()
            times = measure([listed], options.repeats)
            client_cpu = time.process_time() - cpu_before
            wall = time.perf_counter() - wall_before
            for client in clients:
                client.close()
            missed = report(listed, times, client_cpu, wall)
            bulk_over_http(
                plane,
                options.agents,
                (history.until + timedelta(days=7)).isoformat(),
                options.bulk_repeats,
            )
            bulk_in_the_database(
                url, datetime.combine(history.until, wall_time(11, 0), UTC), options.bulk_repeats
            )
            return missed
        finally:
            if plane is not None:
                stop_process(plane.process)
            database.stop()


if __name__ == "__main__":
    sys.exit(main())
