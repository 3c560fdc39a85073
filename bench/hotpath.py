"""The 03:00 hot path under a compiled load generator (wrk), beside a bare baseline, in one run.

Measured, each for `--seconds` at `--connections` connections, for every `--workers` count:

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

    PYTHONPATH=. .venv/bin/python bench/hotpath.py [--agents 1000] [--orgs 50] [--seconds 10]
        [--workers 1,2] [--connections 64]
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
from nachtwacht.worlds.clocks import NightClock
from nachtwacht.worlds.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.worlds.databases import EmbeddedDatabase
from nachtwacht.worlds.processes import REPO_ROOT, child_environment, stop_process

SLOT_KEY = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 CET
WINDOW = timedelta(minutes=15)
ORG_CAP = 5


@dataclass(frozen=True, kw_only=True)
class Figures:
    workers: int
    bare: WrkRun
    healthz: WrkRun
    refusal: WrkRun
    config_304: WrkRun


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


def measure_bare(workers: int, seconds: float, connections: int) -> WrkRun:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "bench" / "bare_app.py"), str(port), str(workers)],
        env=child_environment(),
        cwd=REPO_ROOT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_answering(f"{base}/healthz", process)
        healthz = [Request(method="GET", path="/healthz", headers={})]
        return run_wrk(
            f"bare /healthz ({workers}w)", base, healthz, seconds=seconds, connections=connections
        ).expect(200)
    finally:
        stop_process(process)


def agent_etags(plane: RunningControlPlane, keys: list[str]) -> list[str]:
    etags = []
    with httpx.Client(base_url=plane.base_url, timeout=30) as client:
        for key in keys:
            answer = client.get("/v1/agent/config", headers={"Authorization": f"Bearer {key}"})
            answer.raise_for_status()
            etags.append(answer.headers["etag"])
    return etags


def measure_plane(
    database_url: str,
    keys: list[str],
    workers: int,
    seconds: float,
    connections: int,
    log: Path,
) -> tuple[WrkRun, WrkRun, WrkRun]:
    clock = NightClock.starting(SLOT_AT + timedelta(seconds=30), speed=1.0, lead_seconds=0)
    worker_args = ["--workers", str(workers)] if workers != 1 else []
    plane = start_control_plane(
        stderr_path=log,
        database_url=database_url,
        fake_clock=clock.setting,
        args=["--no-migrate", *worker_args],
    )
    try:
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
        options = {"seconds": seconds, "connections": connections}
        # Warm-up, not counted: every agent asks once per worker, as in a slot's second minute
        # (the first ask of each agent for a slot, and the first of each organisation in each
        # round, is answered by the database; see docs/control_plane.md, "Hot path").
        for label, requests in (("claims", claims), ("polls", polls)):
            warm = run_wrk(f"warm-up {label} {tag}", base, requests, seconds=2.0, connections=8)
            print(f"  ({warm.line().strip()})", flush=True)
        return (
            run_wrk(f"control plane /healthz {tag}", base, healthz, **options).expect(200),
            run_wrk(f"refusal 429 org_cap {tag}", base, claims, **options).expect(429),
            run_wrk(f"config poll 304 {tag}", base, polls, **options).expect(304),
        )
    finally:
        plane.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--orgs", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0)
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
            bare = measure_bare(workers, args.seconds, args.connections)
            print(bare.line(), flush=True)
            healthz, refusal, config_304 = measure_plane(
                database_url, keys, workers, args.seconds, args.connections, log
            )
            for run in (healthz, refusal, config_304):
                print(run.line(), flush=True)
            figures.append(
                Figures(
                    workers=workers,
                    bare=bare,
                    healthz=healthz,
                    refusal=refusal,
                    config_304=config_304,
                )
            )
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)

    print()
    print("workers  bare/s  healthz/s  429/s  304/s   healthz/bare  429/healthz  304/healthz")
    for f in figures:
        print(
            f"{f.workers:7d} {f.bare.per_second:7.0f} {f.healthz.per_second:10.0f} "
            f"{f.refusal.per_second:6.0f} {f.config_304.per_second:6.0f} "
            f"{f.healthz.per_second / f.bare.per_second:14.2f} "
            f"{f.refusal.per_second / f.healthz.per_second:12.2f} "
            f"{f.config_304.per_second / f.healthz.per_second:12.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
