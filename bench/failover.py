"""The time a PostgreSQL failover costs the control plane, and what synchronous replication costs
a grant.

Each run: a primary and its `pg_basebackup -R` standby (pgserver's binaries), two `control serve`
replicas on the multi-host URL (`target_session_attrs=read-write`), simulated agents claiming the
03:00 slot over HTTP (`tests/worlds/failover_night.py`); `--kill-after` seconds into the window the
primary is SIGKILLed (postmaster and backends), `--promote-after` seconds later the standby is
promoted (`pg_ctl promote`). Printed per run and replica: the time to recover — from the kill to
the replica's first database answer (a panel read probed every 50 ms) and to its first grant —
then the median and the maximum over the runs. The promotion delay is part of the figure: what
the control plane adds is the figure minus `--promote-after` and the promotion itself (printed).

`--latency N`: then N claims one after another, each granted (caps above N), on one replica over
the standby pair with asynchronous and with synchronous replication (`synchronous_standby_names`):
the median and p90 of a grant's latency and their ratio — the round trip to the standby a commit
waits for. Loopback here: between machines the round trip is the network's.

    PYTHONPATH=. .venv/bin/python bench/failover.py [--runs 3] [--kill-after 6] [--promote-after 2]
        [--synchronous] [--latency 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from tests.worlds.failover_night import SLOT, FailoverNight
from tests.worlds.replicated_postgres import ReplicatedPair, replicated_pair


def _starter(
    pair: ReplicatedPair, home: Path, started: list[RunningControlPlane]
) -> Callable[[str, list[str]], RunningControlPlane]:
    def start(clock: str, flags: list[str]) -> RunningControlPlane:
        replica = start_control_plane(
            stderr_path=home / f"replica-{len(started)}.stderr",
            database_url=pair.url,
            fake_clock=clock,
            args=flags,
        )
        started.append(replica)
        return replica

    return start


def one_failover(args: argparse.Namespace, run: int) -> list[tuple[float | None, float | None]]:
    started: list[RunningControlPlane] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        replicated_pair(synchronous=args.synchronous) as pair,
    ):
        home = Path(tmp)
        try:
            night = FailoverNight(
                pair, _starter(pair, home, started), home, orgs=2, agents_per_org=8
            )
            night.seed()
            night.run(kill_after=args.kill_after, promote_after=args.promote_after)
            figures = [(r.first_answer, r.first_grant) for r in night.recovery()]
            promoted = night.promoted_at - night.killed_at
        finally:
            for replica in started:
                replica.stop()
    for index, (answer, grant) in enumerate(figures):
        print(
            f"run {run} replica {index}: kill -> first database answer "
            f"{_s(answer)}, first grant {_s(grant)} (standby writable {promoted:.2f} s after"
            " the kill)",
            flush=True,
        )
    return figures


def _s(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f} s"


def grant_latency(count: int, *, synchronous: bool) -> list[float]:
    started: list[RunningControlPlane] = []
    with tempfile.TemporaryDirectory() as tmp, replicated_pair(synchronous=synchronous) as pair:
        home = Path(tmp)
        try:
            night = FailoverNight(
                pair,
                _starter(pair, home, started),
                home,
                orgs=1,
                agents_per_org=count,
                org_cap=count + 1,
                global_cap=count + 1,
            )
            night.seed()
            took = []
            with httpx.Client(base_url=night.replicas[0].base_url, timeout=30) as client:
                for key in night.agent_keys:
                    t0 = time.perf_counter()
                    response = client.post(
                        "/v1/agent/claims",
                        headers={"Authorization": f"Bearer {key}"},
                        json={"slot_key": SLOT, "from_version": "1.4.1"},
                    )
                    took.append(time.perf_counter() - t0)
                    assert response.status_code == 201, response.text
        finally:
            for replica in started:
                replica.stop()
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kill-after", type=float, default=6.0)
    parser.add_argument("--promote-after", type=float, default=2.0)
    parser.add_argument("--synchronous", action="store_true")
    parser.add_argument("--latency", type=int, default=0)
    args = parser.parse_args()
    if args.runs:
        answers: list[float] = []
        grants: list[float] = []
        missing = 0
        for run in range(1, args.runs + 1):
            for answer, grant in one_failover(args, run):
                if answer is None:
                    missing += 1
                else:
                    answers.append(answer)
                if grant is not None:
                    grants.append(grant)
        mode = "synchronous" if args.synchronous else "asynchronous"
        print(
            f"time to recover ({mode} standby promoted {args.promote_after:g} s after the kill,"
            f" {args.runs} runs x 2 replicas): first database answer median"
            f" {statistics.median(answers):.2f} s, max {max(answers):.2f} s;"
            f" first grant median {statistics.median(grants):.2f} s, max {max(grants):.2f} s;"
            f" replicas that never answered: {missing}"
        )
    if args.latency:
        plain = grant_latency(args.latency, synchronous=False)
        synced = grant_latency(args.latency, synchronous=True)
        for name, took in (("asynchronous", plain), ("synchronous", synced)):
            cuts = statistics.quantiles(took, n=10)
            print(
                f"grant latency, {name} standby: median {statistics.median(took) * 1000:.1f} ms,"
                f" p90 {cuts[-1] * 1000:.1f} ms ({len(took)} grants)"
            )
        ratio = statistics.median(synced) / statistics.median(plain)
        print(f"grant latency ratio synchronous / asynchronous (median): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
