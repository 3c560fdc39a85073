"""The scale proof: a fleet of thousands for one night, over the real HTTP API, against two
control-plane replicas over one PostgreSQL.

    PYTHONPATH=. .venv/bin/python bench/fleet.py [--agents 10000] [--orgs 250] [--speed 6]
        [--need-update 0.25] [--config-every 5] [--replicas 2]

Set-up (not measured): an embedded PostgreSQL in a temporary folder, migrated; the organisations
(a mix of sizes, seeded, so every run has the same fleet) and their agents enrolled through the
control plane's own service layer; schedules — most agents keep the column default (03:00), some
organisations have several times a day, a few another time in the night; one signed release
published (`provibr-agent 1.1.0`, a real demo build). `--need-update` of the agents run 1.0.0
and need it; the others already run 1.1.0 (up to date). Then `--replicas` processes of
`nachtwacht control serve` start on one fast fake clock, each with its reconcile worker.

The night (measured): the agents live in this process (`nachtwacht.demo_night.simulated`, asyncio
+ httpx), each at its own second of every platform minute like the daemon, split over the
replicas; a config sync every `--config-every` minutes (the daemon syncs every minute; a 304
costs the server little, and a fleet this size would otherwise measure the simulator). Printed:

- caps held: the most tokens granted in one round, per organisation and in total, against the caps;
- updates done, up to date, missed by reason (the reconcile worker's `missed` rows);
- the forecast (`GET /v1/admin/forecast`) beside what happened, per slot;
- requests per second and p50/p99 latency per endpoint, and how late the simulated agents acted;
- control-plane CPU seconds and peak RSS per replica, and the PostgreSQL server's CPU seconds.

Figures are this machine's, in this run; nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as wall_time
from pathlib import Path
from typing import Any

import httpx

from control_plane.database import open_pool
from control_plane.registry import build_services
from control_plane.types import Pool
from ground.clock import FakeClock
from nachtwacht.demo_night.simulated import SimulatedAgent, SimulatedFleet
from nachtwacht.demo_world.clocks import NightClock, showing_now
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase
from shared_planner import resolve_wall_time, slots_between
from tests.worlds.releases import ReleaseFactory

ZONE = "Europe/Amsterdam"
NIGHT = date(2026, 12, 1)
OLD, NEW = "1.0.0", "1.1.0"
WINDOW = timedelta(minutes=15)
# (share of organisations, schedule): most keep the column default; some update several times a
# day; a few at another time inside the night. None = the column default, untouched.
SCHEDULE_MIX: tuple[tuple[float, list[str] | None], ...] = (
    (0.80, None),
    (0.10, ["03:00", "15:00"]),
    (0.05, ["02:55", "03:10"]),
    (0.05, ["03:05"]),
)
NIGHT_START = wall_time(2, 54)
NIGHT_END = wall_time(3, 27)  # the latest slot (03:10) + its window + two minutes for the worker


@dataclass(frozen=True)
class OrgPlan:
    name: str
    size: int
    times: list[str] | None


def plan_fleet(agents: int, orgs: int, seed: int = 8) -> list[OrgPlan]:
    """Organisation sizes from a skewed mix (a few large, many small), summing to `agents`;
    the largest is at most ten times the mean, as a fleet of customers tends to be."""
    rng = random.Random(seed)
    weights = [min(10.0, rng.lognormvariate(0, 1.0)) for _ in range(orgs)]
    scale = (agents - orgs) / sum(weights)
    sizes = [1 + int(w * scale) for w in weights]
    for index in range(agents - sum(sizes)):
        sizes[index % orgs] += 1
    plans = []
    for index, size in enumerate(sorted(sizes, reverse=True)):
        pick, schedule = rng.random(), SCHEDULE_MIX[0][1]
        for share, times in SCHEDULE_MIX:
            if pick < share:
                schedule = times
                break
            pick -= share
        plans.append(OrgPlan(name=f"org-{index:03d}", size=size, times=schedule))
    return plans


def seed(
    pool: Pool, plans: list[OrgPlan], factory: ReleaseFactory, need_update: float
) -> tuple[list[tuple[str, str, str, str, str]], str]:
    """Enroll the fleet and publish `NEW`; returns (agent id, name, org name, key, installed
    version) and an operator key."""
    before = datetime.combine(NIGHT - timedelta(days=1), wall_time(), tzinfo=UTC)
    clock = showing_now(before)
    services = build_services(pool, factory.trusted)
    release = factory.release(NEW, 2)
    services.releases.publish(
        release.manifest_bytes, release.signature, release.artifact, now=clock.now()
    )
    operator_key = services.accounts.create_operator_key("bench/fleet.py")
    rng = random.Random(1)
    fleet: list[tuple[str, str, str, str, str]] = []

    def enroll_org(plan: OrgPlan) -> list[tuple[str, str, str, str, str]]:
        org = services.accounts.create_org(plan.name, now=clock.now())
        enrolled = []
        for number in range(plan.size):
            issued = services.accounts.enroll_agent(
                org.org_id, f"{plan.name}-{number:04d}", now=clock.now()
            )
            enrolled.append((str(issued.agent_id), issued.name, plan.name, issued.agent_key))
        if plan.times is not None:
            with pool.connection() as conn:
                conn.execute(
                    "UPDATE agents SET update_schedule_times = %s::jsonb WHERE org_id = %s",
                    [json.dumps(plan.times), org.org_id],
                )
        return [(*agent, "") for agent in enrolled]

    with ThreadPoolExecutor(4) as workers:
        for enrolled in workers.map(enroll_org, plans):
            fleet.extend(enrolled)
    fleet = [(a, n, o, k, OLD if rng.random() < need_update else NEW) for a, n, o, k, _ in fleet]
    return fleet, operator_key


# -- processes and their cost ---------------------------------------------------------------------


def _cpu_seconds(pid: int, *, with_children: bool = False) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if with_children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime: reaped children
    return ticks / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _postgres_cpu_seconds(pgdata: Path) -> float:
    """The postmaster (with the backends it has reaped) plus the backends still running."""
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    total = _cpu_seconds(postmaster, with_children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(stat[1]) == postmaster:
                    total += _cpu_seconds(int(entry.name))
    return total


@contextlib.contextmanager
def replicas(
    count: int, database_url: str, clock: FakeClock, logs: Path, settings: list[str]
) -> Iterator[list[RunningControlPlane]]:
    started: list[RunningControlPlane] = []
    try:
        for number in range(count):
            started.append(
                start_control_plane(
                    stderr_path=logs / f"replica-{number}.log",
                    database_url=database_url,
                    fake_clock=clock.setting(),
                    args=["--no-migrate", "--pool-size", "10", *settings],
                )
            )
        yield started
    finally:
        for replica in started:
            replica.stop()


# -- after the night: what the database and the forecast say --------------------------------------


def expected_slots(plans: list[OrgPlan], start: datetime, closed_by: datetime) -> int:
    total = 0
    for plan in plans:
        times = plan.times or ["03:00"]
        slots = slots_between(times, start=start, end=closed_by - WINDOW, tz=ZONE)
        total += plan.size * len(slots)
    return total


def wait_for_the_worker(pool: Pool, start: datetime, end: datetime, expected: int) -> int:
    """Every slot whose window closed has a run row once the reconcile worker has passed."""
    deadline = time.monotonic() + 90
    while True:
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n FROM runs WHERE trigger = 'schedule'"
                " AND slot_at >= %s AND slot_at < %s",
                [start, end - WINDOW],
            ).fetchone()
        rows = int(row["n"]) if row else 0
        if rows >= expected or time.monotonic() > deadline:
            return rows
        time.sleep(1)


def outcomes(pool: Pool, start: datetime, end: datetime) -> dict[str, Any]:
    with pool.connection() as conn:
        by_status = conn.execute(
            # A failure by its reason, else by its error's first words.
            "SELECT slot_key, status, coalesce(miss_reason, outcome_reason,"
            " substring(error FROM '^[^:]*'), '') AS reason, count(*) AS n"
            " FROM runs WHERE trigger = 'schedule' AND slot_at >= %s AND slot_at < %s"
            " GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
            [start, end],
        ).fetchall()
        rounds = conn.execute(
            "SELECT round_start, count(*) AS n FROM tokens WHERE round_start IS NOT NULL"
            " GROUP BY 1 ORDER BY 1"
        ).fetchall()
        org_rounds = conn.execute(
            "SELECT coalesce(max(n), 0) AS most FROM (SELECT t.round_start, r.org_id,"
            " count(*) AS n FROM tokens t JOIN runs r ON r.id = t.run_id"
            " WHERE t.round_start IS NOT NULL GROUP BY 1, 2) g"
        ).fetchone()
        settings = conn.execute(
            "SELECT org_cap, global_cap, grant_margin_seconds FROM platform_settings"
        ).fetchone()
        # Releases halted on errors during the night: a good build must not be.
        halts = conn.execute(
            "SELECT count(*) AS n FROM release_halts WHERE cause = 'errors'"
        ).fetchone()
        # How long a granted run took to report its end, on the platform's clock: a token is
        # useful only if this fits between its grant and its window's close.
        to_report = conn.execute(
            "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY r.finished_at - t.granted_at)"
            " AS p50, max(r.finished_at - t.granted_at) AS most"
            " FROM tokens t JOIN runs r ON r.id = t.run_id"
            " WHERE r.trigger = 'schedule' AND r.slot_at >= %s AND r.slot_at < %s"
            " AND r.status IN ('succeeded', 'failed', 'rolled_back')",
            [start, end],
        ).fetchone()
    return {
        "by_status": by_status,
        "rounds": rounds,
        "most_per_org": org_rounds["most"] if org_rounds else 0,
        "settings": settings,
        "to_report": to_report,
        "halts_on_errors": halts["n"] if halts else 0,
    }


def forecast(base_url: str, operator_key: str) -> dict[str, Any] | None:
    answer = httpx.get(
        f"{base_url}/v1/admin/forecast",
        params={"date": NIGHT.isoformat()},
        headers={"Authorization": f"Bearer {operator_key}"},
        timeout=60,
    )
    if answer.status_code != 200:
        return None
    body: dict[str, Any] = answer.json()
    return body


# -- the run --------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: object) -> None:
    del signum, frame
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--orgs", type=int, default=250)
    parser.add_argument("--speed", type=float, default=6.0, help="fake clock speed-up (6)")
    parser.add_argument("--need-update", type=float, default=0.25, help="share on 1.0.0 (0.25)")
    parser.add_argument("--config-every", type=int, default=5, help="config sync, minutes (5)")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument(
        "--grant-margin-seconds",
        type=int,
        help="no new token in a window's last this many seconds (the platform's default: 60)",
    )
    args = parser.parse_args()
    if not (0 < args.orgs <= args.agents and args.speed > 0 and 0 <= args.need_update <= 1):
        parser.error("need 0 < --orgs <= --agents, --speed > 0 and 0 <= --need-update <= 1")

    signal.signal(signal.SIGTERM, _interrupt)  # unwind like Ctrl-C: replicas and database stop
    home = Path(tempfile.mkdtemp(prefix="nachtwacht-fleet-"))
    home.chmod(0o755)  # the embedded PostgreSQL runs as its own user when this runs as root
    embedded = EmbeddedDatabase(home / "control-plane")
    try:
        return run(args, home, embedded)
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, home: Path, embedded: EmbeddedDatabase) -> int:
    began = time.monotonic()
    database_url = embedded.start()
    pool = open_pool(database_url, min_size=1, max_size=6)
    factory = ReleaseFactory(
        workdir=home, issued_at=datetime.combine(NIGHT - timedelta(days=2), wall_time(), tzinfo=UTC)
    )
    plans = plan_fleet(args.agents, args.orgs)
    enrolled, operator_key = seed(pool, plans, factory, args.need_update)
    sizes = sorted((p.size for p in plans), reverse=True)
    mix = Counter(json.dumps(p.times or ["03:00 (default)"]) for p in plans)
    print(
        f"fleet: {len(enrolled)} agents in {len(plans)} organisations (largest {sizes[:5]}, "
        f"median {sizes[len(sizes) // 2]}, smallest {sizes[-1]}); set up in "
        f"{time.monotonic() - began:.0f} s"
    )
    print("  schedules (organisations): " + ", ".join(f"{t} {n}" for t, n in mix.most_common()))
    needing = sum(1 for agent in enrolled if agent[4] == OLD)
    print(f"  {needing} agents run {OLD} and need {NEW}; {len(enrolled) - needing} already run it")

    start = resolve_wall_time(NIGHT, NIGHT_START, ZONE)
    end = resolve_wall_time(NIGHT, NIGHT_END, ZONE)
    clock = NightClock.starting(start, speed=args.speed, lead_seconds=5).fake()
    night_minutes = (end - start).total_seconds() / 60
    print(
        f"night: {NIGHT_START:%H:%M}-{NIGHT_END:%H:%M} {ZONE} on {NIGHT}, {night_minutes:.0f} "
        f"platform minutes at {args.speed:g}x = {night_minutes * 60 / args.speed:.0f} s, "
        f"{args.replicas} replicas, config sync every {args.config_every} min"
    )
    settings: list[str] = []
    if args.grant_margin_seconds is not None:
        settings = ["--grant-margin-seconds", str(args.grant_margin_seconds)]
    with replicas(args.replicas, database_url, clock, home, settings) as running:
        urls = [replica.base_url for replica in running]
        agents = [
            SimulatedAgent(
                agent_id=agent_id, name=name, org_name=org, agent_key=agent_key,
                installed=installed, base_url=urls[index % len(urls)],
            )
            for index, (agent_id, name, org, agent_key, installed) in enumerate(enrolled)
        ]  # fmt: skip
        fleet = SimulatedFleet(
            agents,
            clock=clock,
            trusted_keys=factory.trusted,
            config_every_minutes=args.config_every,
            max_connections=100,
        )
        night_began = time.monotonic()
        asyncio.run(fleet.run(until=end))
        night_seconds = time.monotonic() - night_began
        rows = wait_for_the_worker(pool, start, end, expected_slots(plans, start, end))
        predicted = forecast(urls[0], operator_key)
        costs = [(_cpu_seconds(replica.pid), _peak_rss_mib(replica.pid)) for replica in running]
        postgres_cpu = _postgres_cpu_seconds(embedded.pgdata)
    observed = outcomes(pool, start, end)
    pool.close()
    report(args, fleet, observed, predicted, costs, postgres_cpu, night_seconds, rows)
    print(f"total {time.monotonic() - began:.0f} s")
    return 0


def report(
    args: argparse.Namespace,
    fleet: SimulatedFleet,
    observed: dict[str, Any],
    predicted: dict[str, Any] | None,
    costs: list[tuple[float, float]],
    postgres_cpu: float,
    night_seconds: float,
    run_rows: int,
) -> None:
    settings = observed["settings"]
    most_total = max((row["n"] for row in observed["rounds"]), default=0)
    print("caps held:")
    print(
        f"  most tokens in one round: {most_total} in total (global cap {settings['global_cap']}), "
        f"{observed['most_per_org']} for one organisation (org cap {settings['org_cap']}) — "
        + (
            "held"
            if most_total <= settings["global_cap"]
            and observed["most_per_org"] <= settings["org_cap"]
            else "EXCEEDED"
        )
    )
    print(f"  rounds with grants: {len(observed['rounds'])}")
    print(f"  grant margin: no new token in a window's last {settings['grant_margin_seconds']} s")
    to_report = observed["to_report"]
    if to_report is not None and to_report["p50"] is not None:
        print(
            f"  a grant to its run's report: p50 {to_report['p50'].total_seconds():.0f}, max "
            f"{to_report['most'].total_seconds():.0f} platform seconds"
        )
    totals: Counter[str] = Counter()
    per_slot: dict[str, Counter[str]] = {}
    for row in observed["by_status"]:
        if row["status"] == "missed":
            label = f"missed ({row['reason'] or 'unknown'})"
        else:
            label = f"{row['status']} ({row['reason']})" if row["reason"] else row["status"]
        totals[label] += row["n"]
        per_slot.setdefault(row["slot_key"], Counter())[label] += row["n"]
    print("outcomes (run rows of the night's slots):")
    print("  " + ", ".join(f"{label} {n}" for label, n in sorted(totals.items())))
    print(f"  ({run_rows} rows for the slots whose window closed in the night)")
    print(f"  releases halted on errors: {observed['halts_on_errors']}")
    print("forecast (assumes every agent needs the update) beside what happened:")
    if predicted is None:
        print("  GET /v1/admin/forecast did not answer 200: no forecast to compare")
    for slot in (predicted or {}).get("slots", []):
        seen = per_slot.get(slot["key"], Counter())
        if not seen:
            continue
        missed = sum(n for label, n in seen.items() if label.startswith("missed"))
        print(
            f"  {slot['key']}: {slot['agents']} agents, capacity {slot['capacity']}, forecast "
            f"will_miss {slot['will_miss']} | observed: {seen['succeeded']} updated, "
            f"{seen['up_to_date']} up to date, {missed} missed"
        )
    stats = fleet.stats
    print(f"requests during the night ({night_seconds:.0f} s real):")
    for endpoint in sorted(stats.latencies):
        count = len(stats.latencies[endpoint])
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(stats.statuses[endpoint].items()))
        print(
            f"  {endpoint:<34} {count / night_seconds:7.1f}/s  p50 "
            f"{stats.percentile(endpoint, 0.5) * 1000:6.1f} ms  p99 "
            f"{stats.percentile(endpoint, 0.99) * 1000:7.1f} ms  ({codes})"
        )
    total = sum(len(v) for v in stats.latencies.values())
    print(
        f"  all endpoints: {total / night_seconds:.1f}/s; transport errors: {dict(stats.failures)}"
    )
    lags = sorted(stats.tick_lag)
    if lags:
        p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))]
        print(
            f"  simulated agents acted late by p99 {p99:.0f} platform seconds "
            f"(max {lags[-1]:.0f}); above ~30 the simulator, not the control plane, is the limit"
        )
    print("control plane cost:")
    for number, (cpu, rss) in enumerate(costs):
        print(f"  replica {number}: {cpu:.1f} CPU s, peak RSS {rss:.0f} MiB")
    print(f"  PostgreSQL: {postgres_cpu:.1f} CPU s")


if __name__ == "__main__":
    sys.exit(main())
