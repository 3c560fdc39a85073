"""What the shipped nginx site costs an agent, and what a replica's death costs it, in one run.

Two `nachtwacht control serve` replicas over the embedded PostgreSQL, Debian's nginx in front
with the shipped site (`packaging/nginx/nachtwacht.conf`, as the tests start it: TLS from a CA
made here, one nginx worker). Then:

1. the config poll, one agent after another on kept-alive connections, `--polls` x `--rounds`
   of each, poll by poll in turn: straight to the replicas over plain HTTP, taking turns (the
   baseline), and through nginx over TLS. Medians and 95th percentiles of each, and the ratio
   of the medians;
2. a replica SIGKILLed while `--pollers` threads poll through nginx without pause: how many
   polls failed (the goal: none), how many nginx passed from the dead replica to the other,
   and the slowest poll of the second after the kill beside the median before it.

    PYTHONPATH=. .venv/bin/python bench/balancer.py [--agents 200] [--polls 300] [--rounds 3]
        [--pollers 4]
"""

from __future__ import annotations

import argparse
import os
import shutil
import ssl
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from bench.herd import Agent, seed
from ground.contract import CONFIG_PATH, HOST_ID_HEADER
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase
from tests.worlds.balancer import Balancer, nginx_balancer


def _poll(client: httpx.Client, agent: Agent) -> float:
    """One config poll; its duration in seconds. Raises on an answer that is not 200."""
    channel, platform = agent.pair
    started = time.perf_counter()
    answer = client.get(
        CONFIG_PATH,
        params={"channel": channel, "platform": platform},
        headers={"Authorization": f"Bearer {agent.key}", HOST_ID_HEADER: f"host-{agent.agent_id}"},
    )
    elapsed = time.perf_counter() - started
    if answer.status_code != 200:
        raise RuntimeError(f"config poll: {answer.status_code} {answer.text[:200]}")
    return elapsed


def _client(base_url: str, ca_file: Path | None = None) -> httpx.Client:
    verify: ssl.SSLContext | bool = (
        ssl.create_default_context(cafile=str(ca_file)) if ca_file is not None else True
    )
    return httpx.Client(base_url=base_url, verify=verify, timeout=30)


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def measure_overhead(
    replicas: list[RunningControlPlane],
    balancer: Balancer,
    fleet: list[Agent],
    polls: int,
    rounds: int,
) -> None:
    times: dict[str, list[float]] = {"direct": [], "nginx": []}
    with (
        _client(replicas[0].base_url) as first,
        _client(replicas[1].base_url) as second,
        _client(balancer.url, balancer.ca_file) as through,
    ):
        # The baseline takes turns between the replicas as nginx's round robin does, so both
        # kinds spread the same polls over the same two processes.
        kinds = {"direct": (first, second), "nginx": (through, through)}
        for clients in kinds.values():  # warm-up: connections, TLS session, the memory
            for n, agent in enumerate(fleet[:20]):
                _poll(clients[n % 2], agent)
        # Poll by poll in turn: the shared machine's speed moves within a second.
        for _ in range(rounds):
            for n in range(polls):
                for kind, clients in kinds.items():
                    times[kind].append(_poll(clients[n % 2], fleet[n % len(fleet)]))
    print(f"config poll, one at a time, {rounds} x {polls} of each, poll by poll in turn:")
    for kind, values in times.items():
        print(
            f"  {kind:7s} median {statistics.median(values) * 1000:6.2f} ms"
            f"  p95 {_percentile(values, 0.95) * 1000:6.2f} ms"
        )
    ratio = statistics.median(times["nginx"]) / statistics.median(times["direct"])
    print(f"  nginx+TLS / direct (medians): {ratio:.2f}x")


def measure_failover(
    victim: RunningControlPlane,
    survivor: RunningControlPlane,
    balancer: Balancer,
    fleet: list[Agent],
    pollers: int,
) -> None:
    samples: list[tuple[float, float]] = []  # (finished at, duration)
    failures: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def poll_on(offset: int) -> None:
        with _client(balancer.url, balancer.ca_file) as client:
            n = offset
            while not stop.is_set():
                try:
                    took = _poll(client, fleet[n % len(fleet)])
                except (httpx.HTTPError, RuntimeError) as exc:
                    with lock:
                        failures.append(repr(exc))
                else:
                    with lock:
                        samples.append((time.monotonic(), took))
                n += pollers

    log_before = len(balancer.access())
    threads = [threading.Thread(target=poll_on, args=(n,)) for n in range(pollers)]
    for thread in threads:
        thread.start()
    time.sleep(3)
    killed_at = time.monotonic()
    victim.process.kill()
    victim.process.wait()
    time.sleep(3)
    stop.set()
    for thread in threads:
        thread.join()
    before = [took for at, took in samples if at < killed_at]
    after = [took for at, took in samples if killed_at <= at < killed_at + 1]
    dead = victim.base_url.removeprefix("http://").rstrip("/")
    alive = survivor.base_url.removeprefix("http://").rstrip("/")
    passed_on = sum(f"upstream={dead}, {alive} " in line for line in balancer.access()[log_before:])
    print(f"a replica SIGKILLed under {pollers} polling threads through nginx:")
    print(f"  polls {len(samples) + len(failures)}, failed {len(failures)}")
    print(f"  passed by nginx from the dead replica to the other: {passed_on}")
    print(
        f"  median before the kill {statistics.median(before) * 1000:.2f} ms; slowest in the"
        f" second after it {max(after) * 1000:.2f} ms"
    )
    for failure in failures[:5]:
        print(f"  failure: {failure}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--orgs", type=int, default=10)
    parser.add_argument("--polls", type=int, default=300, help="polls per run (300)")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each kind, in turn (3)")
    parser.add_argument("--pollers", type=int, default=4, help="threads polling at the kill (4)")
    args = parser.parse_args()

    home = Path(tempfile.mkdtemp(prefix="nachtwacht-balancer-"))
    home.chmod(0o755)  # the embedded server runs as its own user when the bench runs as root
    embedded = EmbeddedDatabase(home / "db")
    replicas: list[RunningControlPlane] = []
    try:
        database_url = embedded.start()
        print(f"seeding {args.agents} agents in {args.orgs} organisations …", flush=True)
        fleet = seed(database_url, args.agents, args.orgs, home)
        for n in range(2):
            replicas.append(
                start_control_plane(
                    stderr_path=home / f"replica-{n}.log", database_url=database_url
                )
            )
        print(f"machine: {os.cpu_count()} cores; two replicas, one worker each", flush=True)
        with nginx_balancer(home / "nginx", [r.base_url for r in replicas]) as balancer:
            measure_overhead(replicas, balancer, fleet, args.polls, args.rounds)
            measure_failover(replicas[1], replicas[0], balancer, fleet, args.pollers)
    finally:
        for replica in replicas:
            if replica.process.poll() is None:
                replica.stop()
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
