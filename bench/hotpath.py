"""The 03:00 hot path under a compiled load generator (wrk), beside a bare baseline, in one run.

Measured with wrk at `--connections` connections, for every `--workers` count, with both servers
up side by side: `--rounds` rounds of four runs of `--seconds` each, in turn —

1. `bare /healthz`: a bare FastAPI app (`bench/bare_app.py`) on the same uvicorn with the same
   server options and worker count: what a Python ASGI server does without our stack;
2. `/healthz` of `nachtwacht control serve`: what our stack adds (middleware, handlers, options);
3. the refusal: `POST /v1/agent/claims` answered 429 `org_cap` — every organisation's counter for
   the round is full, as at 03:00 — rotating through every agent's real credential;
4. the config poll answered 304: `GET /v1/agent/config` with each agent's own current ETag.

Before 3 and 4, a warm-up (2 s, 8 connections, not counted) lets every agent ask once, as it
has by the second minute of a slot: the memory then answers what it knows (docs/control_plane.md,
"Hot path", says which requests still go to the database in production).

The server runs on the embedded PostgreSQL on a real-speed fake clock that shows 03:00:30 when
the measurements start, so the round moves on every minute and `last_seen_at` is written as it
would be (the counters are filled for every round of the window). Every run checks its statuses:
a run whose answers were not (almost all) the expected status stops the benchmark. wrk's own CPU
is printed beside each figure so a client-bound run shows itself.

The runs take turns because the baseline must see the same machine: on a shared VM the speed
moves by a tenth or more within a minute, and a bare app measured 20 s before `/healthz` gave
ratios from 0.69 to 0.90 in one day's runs. The table gives each kind's requests/s over all its
runs, the ratios of those sums, and the range of the per-round ratios.

    PYTHONPATH=. .venv/bin/python bench/hotpath.py [--agents 1000] [--orgs 50] [--seconds 5]
        [--rounds 3] [--workers 1,2] [--connections 64]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg

from bench.herd import seed
from bench.wrk_load import Request, WrkRun, require_wrk, run_wrk
from nachtwacht.demo_world.children import stop_process
from nachtwacht.demo_world.clocks import NightClock
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase
from tests.worlds.processes import REPO_ROOT, child_environment

SLOT_KEY = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 CET
WINDOW = timedelta(minutes=15)
ORG_CAP = 5


@dataclass(frozen=True, kw_only=True)
class Figures:
    """One worker count's runs, `rounds` of each kind, measured in turn (bare, `/healthz`, the
    refusal, the 304, then again), so a machine that slows down or speeds up mid-run (a shared
    VM) moves every kind alike instead of the one measured at that moment."""

    workers: int
    runs: dict[str, list[WrkRun]]

    def per_second(self, kind: str) -> float:
        runs = self.runs[kind]
        return sum(run.requests for run in runs) / sum(run.seconds for run in runs)

    def ratio(self, kind: str, baseline: str) -> float:
        return self.per_second(kind) / self.per_second(baseline)

    def round_ratios(self, kind: str, baseline: str) -> list[float]:
        return [
            run.per_second / base.per_second
            for run, base in zip(self.runs[kind], self.runs[baseline], strict=True)
        ]


def fill_org_counters(database_url: str) -> None:
    """Every organisation's cap is taken in every round of the window: each claim is refused."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO claim_rounds_org (round_start, org_id, granted)"
            " SELECT r, o.id, %s FROM orgs o,"
            " generate_series(%s::timestamptz, %s::timestamptz, interval '1 minute') r",
            [ORG_CAP, SLOT_AT, SLOT_AT + WINDOW],
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def wait_until_answering(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server behind {url} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer within 60 s")


def start_bare(workers: int) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "bench" / "bare_app.py"), str(port), str(workers)],
        env=child_environment(),
        cwd=REPO_ROOT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_answering(f"{base}/healthz", process)
    except BaseException:
        stop_process(process)
        raise
    return process, base


def agent_etags(plane: RunningControlPlane, keys: list[str]) -> list[str]:
    etags = []
    with httpx.Client(base_url=plane.base_url, timeout=30) as client:
        for key in keys:
            answer = client.get("/v1/agent/config", headers={"Authorization": f"Bearer {key}"})
            answer.raise_for_status()
            etags.append(answer.headers["etag"])
    return etags


def measure(
    database_url: str,
    keys: list[str],
    workers: int,
    options: argparse.Namespace,
    log: Path,
) -> Figures:
    """The bare app and the control plane side by side, each kind measured `options.rounds`
    times in turn."""
    clock = NightClock.starting(SLOT_AT + timedelta(seconds=30), speed=1.0, lead_seconds=0)
    worker_args = ["--workers", str(workers)] if workers != 1 else []
    bare, bare_base = start_bare(workers)
    plane: RunningControlPlane | None = None
    try:
        plane = start_control_plane(
            stderr_path=log,
            database_url=database_url,
            fake_clock=clock.setting,
            args=["--no-migrate", *worker_args],
        )
        base = plane.base_url
        etags = agent_etags(plane, keys)
        healthz = [Request(method="GET", path="/healthz", headers={})]
        claims = [
            Request(
                method="POST",
                path="/v1/agent/claims",
                headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
                body=f'{{"slot_key": "{SLOT_KEY}", "from_version": "1.4.1"}}',
            )
            for key in keys
        ]
        polls = [
            Request(
                method="GET",
                path="/v1/agent/config",
                headers={"Authorization": f"Bearer {key}", "If-None-Match": etag},
            )
            for key, etag in zip(keys, etags, strict=True)
        ]
        tag = f"({workers}w)"
        # Warm-up, not counted: every agent asks once per worker, as in a slot's second minute
        # (the first ask of each agent for a slot, and the first of each organisation in each
        # round, is answered by the database; see docs/control_plane.md, "Hot path").
        for label, requests in (("claims", claims), ("polls", polls)):
            warm = run_wrk(f"warm-up {label} {tag}", base, requests, seconds=2.0, connections=8)
            print(f"  ({warm.line().strip()})", flush=True)
        plan = {
            "bare": (f"bare /healthz {tag}", bare_base, healthz, 200),
            "healthz": (f"control plane /healthz {tag}", base, healthz, 200),
            "refusal": (f"refusal 429 org_cap {tag}", base, claims, 429),
            "config_304": (f"config poll 304 {tag}", base, polls, 304),
        }
        runs: dict[str, list[WrkRun]] = {kind: [] for kind in plan}
        for round_number in range(1, options.rounds + 1):
            for kind, (label, url, requests, status) in plan.items():
                run = run_wrk(
                    f"{label} #{round_number}",
                    url,
                    requests,
                    seconds=options.seconds,
                    connections=options.connections,
                ).expect(status)
                runs[kind].append(run)
                print(run.line(), flush=True)
        return Figures(workers=workers, runs=runs)
    finally:
        if plane is not None:
            plane.stop()
        stop_process(bare)


def _spread(ratios: list[float]) -> str:
    ordered = sorted(ratios)
    return f"{ordered[0]:.2f}-{ordered[-1]:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--orgs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0, help="per run (5)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each kind, in turn (3)")
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--workers", default="1,2", help="worker counts to measure (1,2)")
    args = parser.parse_args()
    require_wrk()
    worker_counts = [int(part) for part in args.workers.split(",")]

    home = Path(tempfile.mkdtemp(prefix="nachtwacht-hotpath-"))
    home.chmod(0o755)  # the embedded server runs as its own user when the bench runs as root
    embedded = EmbeddedDatabase(home)
    log = Path(tempfile.gettempdir()) / "nachtwacht-hotpath-control-plane.log"
    log.unlink(missing_ok=True)
    figures: list[Figures] = []
    try:
        database_url = embedded.start()
        print(f"seeding {args.agents} agents in {args.orgs} organisations …", flush=True)
        fleet = seed(database_url, args.agents, args.orgs, home)
        fill_org_counters(database_url)
        keys = [agent.key for agent in fleet]
        print(f"machine: {os.cpu_count()} cores; control plane log: {log}", flush=True)
        for workers in worker_counts:
            figures.append(measure(database_url, keys, workers, args, log))
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)

    print()
    print(
        f"requests/s over the {args.rounds} runs of each kind; ratios of the sums, and (per round)"
        " their range"
    )
    print("workers  bare/s  healthz/s  429/s  304/s   healthz/bare  429/healthz  304/healthz")
    for f in figures:
        print(
            f"{f.workers:7d} {f.per_second('bare'):7.0f} {f.per_second('healthz'):10.0f} "
            f"{f.per_second('refusal'):6.0f} {f.per_second('config_304'):6.0f} "
            f"{f.ratio('healthz', 'bare'):14.2f} "
            f"{f.ratio('refusal', 'healthz'):12.2f} "
            f"{f.ratio('config_304', 'healthz'):12.2f}"
        )
        print(
            f"{'':7} {'':7} {'':10} {'':6} {'':6} "
            f"{_spread(f.round_ratios('healthz', 'bare')):>14} "
            f"{_spread(f.round_ratios('refusal', 'healthz')):>12} "
            f"{_spread(f.round_ratios('config_304', 'healthz')):>12}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
