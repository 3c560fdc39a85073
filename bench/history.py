"""A year of history against none: the same 10,000 agents, two control planes side by side.

Two databases hold the same fleet (`bench/year_of_history.py`: organisations, agents, keys,
releases); one also holds a year of its history. A control plane serves each, on a real-speed
fake clock at 03:00:30 of the night after the history (Amsterdam), and every measurement is made
on both in turn, so a shared machine that slows down slows both:

- the hot path, with wrk (`bench/wrk_load.py`), `--rounds` runs of `--seconds` on each: the claim
  refused `429 org_cap` (every organisation's counter full, as at 03:00) and the config poll
  answered `304`, rotating through every agent's key;
- reads, `--repeat` times each, alternating year and empty, one request at a time: `/metrics`,
  the task tray (`/v1/operations`), notifications (`/v1/notifications`), one agent's timeline
  (`/v1/agents/{id}/events`) and runs, the operators' trail of one organisation and of one kind
  (`/v1/admin/events`), the operators' releases page, the forecast of the next night
  (`/v1/admin/forecast`), the operators' main page (the fleet, the nights, the rollout and the
  last 24 hours' charts) and one organisation's page, and the panel's agent list and
  notifications (signed in, HTML);
- the worker's passes, in this process on each database, each in a transaction rolled back so every
  repetition does the same work: the missed pass for the night's slot when every agent missed it
  (10,000 missed runs and their events) and when the rest ran (one in fifty missed: the others'
  runs written first, not timed), and the reconcile pass's database work (missed slots, outlived
  claims, the per-slot review). Before each, the fleet without history is put back as generated
  (the dead rows of the repetitions before removed, its indexes rebuilt, analysed): its first
  night; the year's tables are vacuumed of those rows, as autovacuum leaves them by the next night.

Prints the medians, the ratio year/empty for each, and this process's CPU (the client).

    PYTHONPATH=. .venv/bin/python bench/history.py --year-url URL --empty-url URL [--repeat 15]
    PYTHONPATH=. .venv/bin/python bench/history.py --data-dir DIR [--shared-buffers 1GB]
        (generates both once: ~20 min)
"""

from __future__ import annotations

import argparse
import faulthandler
import resource
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
from psycopg import sql

from bench.hotpath import fill_org_counters
from bench.wrk_load import Request, require_wrk, run_wrk
from bench.year_of_history import (
    History,
    agent_key,
    fill_history,
    operator_key,
    panel_key,
    seed_fleet,
)
from control_plane.database import open_pool
from control_plane.reconcile.missed import record_missed_slots
from control_plane.reconcile.outlived import end_outlived_claims
from control_plane.reconcile.review import review_closed_slots
from control_plane.settings.services import read_settings
from nachtwacht.demo_world.clocks import NightClock
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase

SLOT_KEY = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 in Amsterdam
NEXT_NIGHT = "2026-12-01"
KINDS = ("year", "empty")
READ_TIMEOUT = 60.0
TIMED_OUT = 0  # the status recorded for a read that took longer than READ_TIMEOUT


@dataclass
class Timings:
    """Seconds per measurement and database."""

    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    failures: dict[str, set[int]] = field(default_factory=dict)

    def add(self, name: str, kind: str, seconds: float) -> None:
        self.samples.setdefault(name, {k: [] for k in KINDS})[kind].append(seconds)

    def median_ms(self, name: str, kind: str) -> float:
        return statistics.median(self.samples[name][kind]) * 1000


def _align(year_url: str, empty_url: str) -> None:
    """The two databases agree on what the worker has done (the empty one has done nothing; its
    first pass would otherwise look back a day and write a missed run for every agent), and
    every organisation's counter is full for the night's window."""
    with psycopg.connect(year_url) as conn:
        row = conn.execute("SELECT reconciled_until FROM reconcile_progress").fetchone()
    assert row is not None and row[0] is not None, "the year database has no history"
    with psycopg.connect(empty_url) as conn:
        conn.execute("UPDATE reconcile_progress SET reconciled_until = %s", [row[0]])
    for url in (year_url, empty_url):
        with psycopg.connect(url) as conn:
            full = conn.execute(
                "SELECT count(*) FROM claim_rounds_org WHERE round_start = %s", [SLOT_AT]
            ).fetchone()
        if not full or not full[0]:
            fill_org_counters(url)


def _ids(url: str) -> dict[str, Any]:
    """An organisation (the first), one of its agents, and that agent's number."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT a.org_id, a.id, a.name FROM agents a JOIN orgs o ON o.id = a.org_id"
            " ORDER BY o.name, a.name LIMIT 1"
        ).fetchone()
    assert row is not None
    return {"org_id": str(row[0]), "agent_id": str(row[1]), "agent_n": int(row[2].split("-")[1])}


def _signed_in(base_url: str, key: str) -> httpx.Client:
    client = httpx.Client(base_url=base_url, timeout=READ_TIMEOUT)
    form = client.get("/panel/sign-in")
    csrf = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    answer = client.post("/panel/sign-in", data={"key": key, "csrf": csrf})
    if answer.status_code != 303:
        raise RuntimeError(f"sign-in with a {key[:4]} key answered {answer.status_code}")
    return client


def _reads(plane: RunningControlPlane, ids: dict[str, Any]) -> dict[str, Callable[[], int]]:
    """Each read, as a call that makes the request and returns its status."""
    operator = {"Authorization": f"Bearer {operator_key()}"}
    panel = {"Authorization": f"Bearer {panel_key(0)}"}
    api = httpx.Client(base_url=plane.base_url, timeout=READ_TIMEOUT)
    customer = _signed_in(plane.base_url, panel_key(0))
    staff = _signed_in(plane.base_url, operator_key())
    agent = ids["agent_id"]

    def get(client: httpx.Client, path: str, headers: dict[str, str] | None = None) -> int:
        try:
            return client.get(path, headers=headers).status_code
        except httpx.TimeoutException:
            return TIMED_OUT

    return {
        "/metrics": lambda: get(api, "/metrics", operator),
        "task tray": lambda: get(api, "/v1/operations", panel),
        "notifications": lambda: get(api, "/v1/notifications", panel),
        "an agent's timeline": lambda: get(api, f"/v1/agents/{agent}/events", panel),
        "an agent's runs": lambda: get(api, f"/v1/agents/{agent}/runs", panel),
        "trail: one organisation": lambda: get(
            api, f"/v1/admin/events?org_id={ids['org_id']}", operator
        ),
        "trail: one kind": lambda: get(api, "/v1/admin/events?kind=update.failed", operator),
        "operators' releases page": lambda: get(staff, "/panel/operator/releases"),
        "forecast, next night": lambda: get(api, f"/v1/admin/forecast?date={NEXT_NIGHT}", operator),
        "operators' main page": lambda: get(staff, "/panel/operator"),
        "operators' organisation page": lambda: get(staff, f"/panel/operator/orgs/{ids['org_id']}"),
        "panel: agents": lambda: get(customer, "/panel/agents"),
        "panel: notifications": lambda: get(customer, "/panel/notifications"),
    }


# What a pass writes, itself or through its triggers.
PASS_WRITES = (
    "runs",
    "events",
    "notifications",
    "webhook_deliveries",
    "slot_reviews",
    "agent_mentions",
    "answer_changes",
    "run_ending_counts",
    "run_ending_totals",
    "history_counts",
)


def _as_generated(url: str) -> None:
    """The fleet without history back as the generator left it, before each of its passes.

    A pass rolled back leaves its rows behind as dead rows: 10,000 runs and events each time.
    Among a year's 3.7 million they change nothing; in tables that hold no rows they are all
    there is, and once autovacuum has removed them it records each table as empty over the index
    pages they filled. The planner then takes every index of `runs` for empty, whatever its
    columns: the review read each organisation's runs of the slot through the index by agent
    (every agent's entries, the dead ones too), and the pass took longer with each repetition
    (7 to 9 s against 5 s for the year). No deployment has those statistics. Rebuilt indexes and
    fresh statistics give each repetition the generator's state again (a second, not timed):
    tables analysed while empty, as after an ANALYZE run on a new install."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"VACUUM {', '.join(PASS_WRITES)}")
        for table in PASS_WRITES:
            conn.execute(f"REINDEX TABLE {table}")
        conn.execute(f"ANALYZE {', '.join(PASS_WRITES)}")


def _without_dead_rows(url: str) -> None:
    """The year's tables without the rows the repetitions before left behind, as autovacuum
    leaves them by the next night: their heap and index entries removed (not rebuilt: a year's
    indexes are as the year made them). Without it every repetition's runs stay in the unique
    index beside the next one's for the same agent and slot, which no night meets."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"VACUUM (INDEX_CLEANUP ON) {', '.join(PASS_WRITES)}")


# Before each pass: the fleet without history as generated, the year's as its next night finds it.
CLEAN: dict[str, Callable[[str], None]] = {"year": _without_dead_rows, "empty": _as_generated}

# The night's other agents ran: one in fifty missed it, as on a usual night (a host the hot path
# was refused for its rolled-back release already has its slot's run).
USUALLY_MISSED = 50
_NIGHT_RAN = """
INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, from_version, version,
                  created_at, finished_at)
SELECT id, org_id, 'schedule', %(key)s, %(at)s, 'up_to_date',
       coalesce(current_version, '1.0.0'), coalesce(current_version, '1.0.0'),
       %(at)s + interval '2 minutes', %(at)s + interval '2 minutes'
  FROM agents
 WHERE deleted_at IS NULL AND abs(hashtext(id::text)) %% %(one_in)s <> 0
ON CONFLICT DO NOTHING
"""


def _passes(url: str) -> dict[str, Callable[[], float]]:
    """The worker's passes over the night's slot, each rolled back when done; each returns the
    seconds of what it measures."""
    pool = open_pool(url, min_size=1, max_size=1)
    now = SLOT_AT + timedelta(minutes=20)
    until = now - timedelta(minutes=1)
    with pool.connection() as conn:
        platform = read_settings(conn)
    window = timedelta(minutes=platform.catch_up_minutes)

    def record_missed(conn: psycopg.Connection[Any]) -> None:
        record_missed_slots(
            conn,
            timezone=platform.timezone,
            window=window,
            after=SLOT_AT - timedelta(hours=1),
            until=until,
            now=now,
        )

    def missed_pass() -> float:
        with pool.connection() as conn, conn.transaction(force_rollback=True):
            began = time.perf_counter()
            record_missed(conn)
            return time.perf_counter() - began

    def usual_night() -> float:
        """The missed pass after a night the rest of the fleet ran (their runs not timed)."""
        with pool.connection() as conn, conn.transaction(force_rollback=True):
            ran = conn.execute(
                _NIGHT_RAN, {"key": SLOT_KEY, "at": SLOT_AT, "one_in": USUALLY_MISSED}
            ).rowcount
            assert ran > 0, "no agent ran the night's slot"
            began = time.perf_counter()
            record_missed(conn)
            return time.perf_counter() - began

    def reconcile_pass() -> float:
        with pool.connection() as conn, conn.transaction(force_rollback=True):
            began = time.perf_counter()
            record_missed(conn)
            end_outlived_claims(conn, window=window, until=until, now=now)
            review_closed_slots(
                conn,
                zone=platform.zone,
                window=window,
                until=until,
                outcome_grace=timedelta(minutes=60),
                now=now,
            )
            return time.perf_counter() - began

    return {
        "missed pass, every agent missed": missed_pass,
        f"missed pass, 1 in {USUALLY_MISSED} missed": usual_night,
        "reconcile pass": reconcile_pass,
    }


def _hot_path(
    planes: dict[str, RunningControlPlane], agents: int, args: argparse.Namespace
) -> dict[str, dict[str, list[float]]]:
    """requests/s of the refusal and the 304, per database, measured in turn.

    The refusal is measured over the agents whose claim both databases refuse for the caps: on
    the year's, a few hosts rolled their pair's current release back, and their claims are
    refused `release_rolled_back` first (as the contract orders the refusals)."""
    keys = _refused_for_the_caps(planes, [agent_key(n) for n in range(agents)])
    print(f"the refusal over the {len(keys)} of {agents} agents refused 429 on both", flush=True)
    requests: dict[str, dict[str, tuple[list[Request], int]]] = {}
    for kind, plane in planes.items():
        with httpx.Client(base_url=plane.base_url, timeout=60) as client:
            etags = [
                client.get("/v1/agent/config", headers={"Authorization": f"Bearer {key}"}).headers[
                    "etag"
                ]
                for key in keys
            ]
        requests[kind] = {
            "claim refused 429": (
                [
                    Request(
                        method="POST",
                        path="/v1/agent/claims",
                        headers={
                            "Authorization": f"Bearer {key}",
                            "Content-Type": "application/json",
                        },
                        body=f'{{"slot_key": "{SLOT_KEY}", "from_version": "1.0.0"}}',
                    )
                    for key in keys
                ],
                429,
            ),
            "config poll 304": (
                [
                    Request(
                        method="GET",
                        path="/v1/agent/config",
                        headers={"Authorization": f"Bearer {key}", "If-None-Match": etag},
                    )
                    for key, etag in zip(keys, etags, strict=True)
                ],
                304,
            ),
        }
        for label, (made, _) in requests[kind].items():
            run_wrk(f"warm-up {label} {kind}", plane.base_url, made, seconds=2.0, connections=8)
    figures: dict[str, dict[str, list[float]]] = {}
    for round_number in range(1, args.rounds + 1):
        for label in ("claim refused 429", "config poll 304"):
            for kind, plane in planes.items():
                made, status = requests[kind][label]
                run = run_wrk(
                    f"{label} {kind} #{round_number}",
                    plane.base_url,
                    made,
                    seconds=args.seconds,
                    connections=args.connections,
                ).expect(status)
                print(run.line(), flush=True)
                figures.setdefault(label, {k: [] for k in KINDS})[kind].append(run.per_second)
    return figures


def _refused_for_the_caps(planes: dict[str, RunningControlPlane], keys: list[str]) -> list[str]:
    """The keys whose claim of the night's slot every plane refuses 429 (a cap)."""
    kept = set(keys)
    for plane in planes.values():
        with httpx.Client(base_url=plane.base_url, timeout=60) as client:
            kept &= {
                key
                for key in keys
                if client.post(
                    "/v1/agent/claims",
                    headers={"Authorization": f"Bearer {key}"},
                    json={"slot_key": SLOT_KEY, "from_version": "1.0.0"},
                ).status_code
                == 429
            }
    return [key for key in keys if key in kept]


def _generate(
    data_dir: Path, history: History, shared_buffers: str | None
) -> tuple[EmbeddedDatabase, str, str]:
    embedded = EmbeddedDatabase(data_dir)
    url = _started_with(embedded, shared_buffers)
    names = {"year": "nachtwacht_history_year", "empty": "nachtwacht_history_empty"}
    urls = {}
    with psycopg.connect(url, autocommit=True) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for kind, name in names.items():
            urls[kind] = psycopg.conninfo.make_conninfo(url, dbname=name)
            if name in existing:
                continue
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{conn.info.dbname}"')
            seed_fleet(urls[kind], history, data_dir / "releases")
            if kind == "year":
                fill_history(urls[kind], history)  # ends with VACUUM ANALYZE
            else:
                _analyse(urls[kind])
    return embedded, urls["year"], urls["empty"]


def _started_with(embedded: EmbeddedDatabase, shared_buffers: str | None) -> str:
    """The embedded server started with `shared_buffers` (None: PostgreSQL's default of 128 MB):
    the setting written, and the server started again to take it."""
    with psycopg.connect(embedded.start(), autocommit=True) as conn:
        if shared_buffers is None:
            conn.execute("ALTER SYSTEM RESET shared_buffers")
        else:
            conn.execute(
                sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers))
            )
    embedded.stop()
    url = embedded.start()
    with psycopg.connect(url) as conn:
        row = conn.execute("SHOW shared_buffers").fetchone()
    print(f"the embedded server's shared_buffers: {row[0] if row else '?'}", flush=True)
    return url


def _analyse(url: str) -> None:
    """Statistics for the fleet without history, as the year's database has them: a database
    never analysed has the planner take `runs` for empty, and the missed pass then reads it
    sequentially once per agent, over the rows every rolled-back repetition leaves behind."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--year-url", help="a database `bench/year_of_history.py` filled")
    parser.add_argument("--empty-url", help="the same fleet, `--fleet-only`")
    parser.add_argument("--data-dir", type=Path, help="or: generate both in an embedded server")
    parser.add_argument(
        "--shared-buffers",
        help="with --data-dir: the embedded server's shared_buffers (e.g. 1GB; default 128MB)",
    )
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--orgs", type=int, default=250)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--no-hot-path", action="store_true", help="skip the wrk runs")
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1` prints where a slow run is
    if not args.no_hot_path:
        require_wrk()
    embedded = None
    if args.data_dir:
        embedded, year_url, empty_url = _generate(
            args.data_dir, History(agents=args.agents, orgs=args.orgs), args.shared_buffers
        )
    elif args.year_url and args.empty_url:
        year_url, empty_url = args.year_url, args.empty_url
    else:
        parser.error("give --year-url and --empty-url, or --data-dir")
    urls = {"year": year_url, "empty": empty_url}
    _align(year_url, empty_url)
    clock = NightClock.starting(SLOT_AT + timedelta(seconds=30), speed=1.0, lead_seconds=0)
    logs = Path(tempfile.gettempdir())
    planes: dict[str, RunningControlPlane] = {}
    started_cpu = resource.getrusage(resource.RUSAGE_SELF)
    started = time.monotonic()
    try:
        for kind, url in urls.items():
            planes[kind] = start_control_plane(
                stderr_path=logs / f"nachtwacht-history-{kind}.log",
                database_url=url,
                fake_clock=clock.setting,
                args=[],  # a data dir kept from an older release is migrated first
            )
        timings = Timings()
        reads = {kind: _reads(plane, _ids(urls[kind])) for kind, plane in planes.items()}
        passes = {kind: _passes(url) for kind, url in urls.items()}
        for name in reads["year"]:
            for kind in KINDS:  # once each, not counted: caches and connections
                began = time.perf_counter()
                status = reads[kind][name]()
                print(f"  first {name} on {kind}: {status} in {time.perf_counter() - began:.2f} s")
        print(f"reads, {args.repeat} times each …", flush=True)
        for _ in range(args.repeat):
            for name in reads["year"]:
                for kind in KINDS:
                    began = time.perf_counter()
                    status = reads[kind][name]()
                    timings.add(name, kind, time.perf_counter() - began)
                    if status != 200:
                        timings.failures.setdefault(name, set()).add(status)
        print("the worker's passes …", flush=True)
        for _ in range(max(3, args.repeat // 3)):
            for name in passes["year"]:
                for kind in KINDS:
                    CLEAN[kind](urls[kind])
                    seconds = passes[kind][name]()
                    timings.add(name, kind, seconds)
                    print(f"  {name} on {kind}: {seconds:.2f} s", flush=True)
        # The passes' rolled-back rows out of both, so no autovacuum of them runs under wrk.
        for kind in KINDS:
            CLEAN[kind](urls[kind])
        hot = {} if args.no_hot_path else _hot_path(planes, args.agents, args)
    finally:
        for plane in planes.values():
            plane.stop()
        if embedded is not None:
            embedded.stop()
    used = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (used.ru_utime - started_cpu.ru_utime) + (used.ru_stime - started_cpu.ru_stime)
    print()
    print(f"{'median of ' + str(args.repeat):34} {'year':>10} {'empty':>10} {'year/empty':>11}")
    for name in timings.samples:
        year, empty = timings.median_ms(name, "year"), timings.median_ms(name, "empty")
        failed = timings.failures.get(name)
        note = f"  (answered {sorted(failed)}; 0 = over {READ_TIMEOUT:.0f} s)" if failed else ""
        print(f"{name:34} {year:8.1f} ms {empty:7.1f} ms {year / empty:10.2f}x{note}")
    for label, per_kind in hot.items():
        year_rate = sum(per_kind["year"]) / len(per_kind["year"])
        empty_rate = sum(per_kind["empty"]) / len(per_kind["empty"])
        print(
            f"{label:34} {year_rate:6.0f} r/s {empty_rate:5.0f} r/s {year_rate / empty_rate:10.2f}x"
        )
    print(
        f"client (this process) CPU {cpu:.1f} s over {time.monotonic() - started:.0f} s;"
        " wrk's own CPU is in each wrk line above"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
