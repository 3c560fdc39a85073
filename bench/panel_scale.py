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
CPU, the machine's load, and whether each holds the target: under 100 ms at the median. Then,
once each and without a target, the bulk actions over every agent of the list: a hold (one
change per agent on the trail) and its end.

    PYTHONPATH=. .venv/bin/python bench/panel_scale.py [--agents 2000] [--days 365]
        [--repeats 9] [--data-dir DIR (keeps the generated database for the next run)]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as wall_time
from pathlib import Path
from uuid import UUID

import httpx
import psycopg

from bench.year_of_history import History, fill_history, panel_key, seed_fleet
from nachtwacht.demo_world.children import stop_process
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase

TARGET_MS = 100.0
DATABASE = "nachtwacht_panel_scale"


@dataclass(frozen=True, kw_only=True)
class Read:
    label: str
    get: Callable[[], httpx.Response]


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


def signed_in(base_url: str, key: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, timeout=120, follow_redirects=False)
    form = client.get("/panel/sign-in")
    csrf = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    answer = client.post("/panel/sign-in", data={"key": key, "csrf": csrf})
    if answer.status_code not in (302, 303):
        raise SystemExit(f"sign-in with the bench's panel key answered {answer.status_code}")
    return client


def reads(plane: RunningControlPlane, agent: UUID) -> tuple[list[Read], list[httpx.Client]]:
    panel = signed_in(plane.base_url, panel_key(0))
    bare = httpx.Client(base_url=plane.base_url, timeout=120)

    def on(client: httpx.Client, path: str, **params: str) -> Callable[[], httpx.Response]:
        return lambda: client.get(path, params=params)

    listed = [
        Read(label="baseline /healthz", get=on(bare, "/healthz")),
        Read(label="agents", get=on(panel, "/panel/agents")),
        Read(label="agents state=failed", get=on(panel, "/panel/agents", state="failed")),
        Read(label="agents state=pinned", get=on(panel, "/panel/agents", state="pinned")),
        Read(label="agents state=behind", get=on(panel, "/panel/agents", state="behind")),
        Read(
            label="agents q=agent-01 sort=-version",
            get=on(panel, "/panel/agents", q="agent-01", sort="-version"),
        ),
        Read(
            label="agents page=30 sort=-seen",
            get=on(panel, "/panel/agents", page="30", sort="-seen"),
        ),
        Read(label="agent page", get=on(panel, f"/panel/agents/{agent}")),
        Read(label="notifications", get=on(panel, "/panel/notifications")),
    ]
    return listed, [panel, bare]


def measure(listed: list[Read], repeats: int) -> dict[str, list[float]]:
    """One turn to warm up, then `repeats` turns through every read (so a machine that slows
    down mid-run slows every read alike)."""
    times: dict[str, list[float]] = {read.label: [] for read in listed}
    for turn in range(repeats + 1):
        for read in listed:
            started = time.perf_counter()
            answer = read.get()
            elapsed = (time.perf_counter() - started) * 1000
            if answer.status_code != 200:
                raise SystemExit(f"{read.label}: answered {answer.status_code}")
            if turn:
                times[read.label].append(elapsed)
    return times


def report(
    listed: list[Read], times: dict[str, list[float]], client_cpu: float, wall: float
) -> int:
    baseline = statistics.median(times[listed[0].label])
    missed = []
    print(f"{'read':34} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'x /healthz':>11}  target")
    for read in listed:
        median = statistics.median(times[read.label])
        within = median < TARGET_MS
        if not within and read is not listed[0]:
            missed.append(read.label)
        print(
            f"{read.label:34} {median:10.1f} {min(times[read.label]):8.1f}"
            f" {max(times[read.label]):8.1f} {median / baseline:11.1f}"
            f"  < {TARGET_MS:.0f} ms {'ok' if within else 'MISSED'}"
        )
    print(f"client CPU: {client_cpu:.1f} s over {wall:.1f} s of reads ({client_cpu / wall:.0%})")
    one, five, _ = os.getloadavg()
    print(f"machine load average: {one:.1f} (1 min), {five:.1f} (5 min) on {os.cpu_count()} cores")
    if missed:
        print("missed targets: " + ", ".join(missed))
        return 1
    print("every read within its target")
    return 0


def bulk_writes(plane: RunningControlPlane, agents: int, until: str) -> None:
    """A hold of every agent of the list, then its end, each timed once (one transaction each)."""
    panel = signed_in(plane.base_url, panel_key(0))
    try:
        for action in ("hold", "release"):
            page = panel.get("/panel/agents")
            csrf = page.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
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
            elapsed = time.perf_counter() - started
            if answer.status_code != 200:
                raise SystemExit(f"bulk {action}: answered {answer.status_code}")
            print(f"bulk {action:8} of all {agents} agents: {elapsed * 1000:8.0f} ms (once)")
    finally:
        panel.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=2_000)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--repeats", type=int, default=9)
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
                args=["--no-migrate"],
            )
            listed, clients = reads(plane, row[0])
            cpu_before = time.process_time()
            wall_before = time.perf_counter()
            times = measure(listed, options.repeats)
            client_cpu = time.process_time() - cpu_before
            wall = time.perf_counter() - wall_before
            for client in clients:
                client.close()
            missed = report(listed, times, client_cpu, wall)
            bulk_writes(plane, options.agents, (history.until + timedelta(days=7)).isoformat())
            return missed
        finally:
            if plane is not None:
                stop_process(plane.process)
            database.stop()


if __name__ == "__main__":
    sys.exit(main())
