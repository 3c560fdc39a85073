"""The thundering herd at 03:00: N agents in M organisations claim the same slot, round after round.

The control plane runs as a real process (`nachtwacht control serve`) on the embedded PostgreSQL,
on a fake clock running `--speed` times real time, so a 15-minute window passes in minutes. At the
start of every round (one minute of the server's clock) each agent still waiting posts its claim
once; a 201 is a grant, a 429 waits for the next round, a 409 `window_closed` is a miss. Printed:

- grants per round, per organisation (max) and in total (max): the caps, held exactly;
- the refusal path: requests per second and p50/p99 latency of the 429s;
- the baseline: requests per second of a bare endpoint (`/healthz`) on the same server, in the
  same run, with the same concurrency, and the ratio;
- each agent follows one of two channels on one of two platforms (four pairs, each with its own
  release): grants per pair, and how many grants carried another pair's release (must be 0);
- how many agents missed the window and why. With the default caps the answer is not zero:
  `global cap x window` (25 x 15 = 375) bounds one slot, which is DESIGN.md "Scale".

    PYTHONPATH=. .venv/bin/python bench/herd.py [--agents 4000] [--orgs 100] [--speed S]
        [--concurrency 64]

`--speed` must leave one round (60/speed real seconds) longer than one burst of claims; by default
it allows a real second per 100 agents. Each burst's duration is printed, so an overrun shows.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import psycopg

from control_plane.database import open_pool
from control_plane.forecast.model import forecast_slot
from control_plane.registry import build_services
from ground.clock import FakeClock, SystemClock
from ground.contract import RefusalCode
from nachtwacht.worlds.clocks import NightClock
from nachtwacht.worlds.control_planes import start_control_plane
from nachtwacht.worlds.databases import EmbeddedDatabase
from nachtwacht.worlds.releases import ReleaseFactory

SLOT_KEY = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 CET
WINDOW = timedelta(minutes=15)
# Two channels on two platforms: every agent follows one pair, and each pair has its own release.
PAIRS = [
    (channel, platform)
    for channel in ("stable", "beta")
    for platform in ("linux-x86_64", "linux-aarch64")
]
# The version each pair's release carries, so a grant shows which pair's release it was.
PAIR_VERSIONS = {pair: f"1.5.{n}" for n, pair in enumerate(PAIRS)}


@dataclass
class Herd:
    pending: dict[str, str]  # agent key -> org id
    granted: dict[str, str] = field(default_factory=dict)
    missed: dict[str, str] = field(default_factory=dict)  # agent key -> last refusal
    last_refusal: dict[str, str] = field(default_factory=dict)
    refusal_latencies: list[float] = field(default_factory=list)
    refusal_seconds: float = 0.0
    refusals: int = 0
    other_answers: Counter[int] = field(default_factory=Counter)
    transport_errors: Counter[str] = field(default_factory=Counter)
    tracks: dict[str, tuple[str, str]] = field(default_factory=dict)  # agent key -> its pair
    grants_per_pair: Counter[tuple[str, str]] = field(default_factory=Counter)
    wrong_pair: int = 0


def seed(
    database_url: str, agents: int, orgs: int, workdir: Path
) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """Organisations, agents (all on the default schedule, each following one pair, round
    robin) and one published release per pair."""
    factory = ReleaseFactory(workdir=workdir, issued_at=datetime(2026, 11, 1, tzinfo=UTC))
    pool = open_pool(database_url, min_size=1, max_size=2)
    try:
        services = build_services(pool, factory.trusted)
        now = SystemClock().now()
        # Nobody downloads it: the herd measures claims. Random bytes, so no unpacking to measure.
        artifact = os.urandom(64 * 1024)
        for (channel, platform), version in PAIR_VERSIONS.items():
            release = factory.sign(
                artifact,
                version=version,
                manifest_version=1,
                expires_in=timedelta(days=365),
                unpacked_size=len(artifact),
                channel=channel,
                platform=platform,
            )
            services.releases.publish(
                release.manifest_bytes, release.signature, release.artifact, now=now
            )
        fleet: dict[str, str] = {}
        tracks: dict[str, tuple[str, str]] = {}
        org_ids = [
            services.accounts.create_org(f"org-{n:03d}", now=now).org_id for n in range(orgs)
        ]
        for n in range(agents):
            org_id = org_ids[n % orgs]
            issued = services.accounts.enroll_agent(org_id, f"agent-{n:05d}", now=now)
            fleet[issued.agent_key] = str(org_id)
            tracks[issued.agent_key] = PAIRS[(n // orgs) % len(PAIRS)]
        return fleet, tracks
    finally:
        pool.close()


async def burst(client: httpx.AsyncClient, herd: Herd, concurrency: int) -> float:
    """Every waiting agent claims once; returns the burst's duration in real seconds."""
    limit = asyncio.Semaphore(concurrency)

    async def claim(agent_key: str) -> None:
        async with limit:
            started = time.perf_counter()
            try:
                response = await client.post(
                    "/v1/agent/claims",
                    headers={"Authorization": f"Bearer {agent_key}"},
                    json={
                        "slot_key": SLOT_KEY,
                        "from_version": "1.4.1",
                        "channel": herd.tracks[agent_key][0],
                        "platform": herd.tracks[agent_key][1],
                    },
                )
            except httpx.TransportError as exc:
                # Like an offline agent: nothing consumed, it tries again next round.
                herd.transport_errors[type(exc).__name__] += 1
                return
            elapsed = time.perf_counter() - started
        code = (
            response.json().get("detail", {}).get("code") if response.status_code >= 400 else None
        )
        if response.status_code in {200, 201}:
            herd.granted[agent_key] = herd.pending.pop(agent_key)
            pair = herd.tracks[agent_key]
            herd.grants_per_pair[pair] += 1
            herd.wrong_pair += response.json()["release"]["version"] != PAIR_VERSIONS[pair]
        elif response.status_code == 429:
            herd.refusal_latencies.append(elapsed)
            herd.refusals += 1
            herd.last_refusal[agent_key] = str(code)
        elif code == RefusalCode.WINDOW_CLOSED:
            herd.pending.pop(agent_key)
            herd.missed[agent_key] = herd.last_refusal.get(agent_key, "never answered in time")
        else:
            herd.other_answers[response.status_code] += 1

    started = time.perf_counter()
    await asyncio.gather(*(claim(agent_key) for agent_key in list(herd.pending)))
    return time.perf_counter() - started


async def bare_baseline(client: httpx.AsyncClient, requests: int, concurrency: int) -> float:
    limit = asyncio.Semaphore(concurrency)

    async def hit() -> None:
        async with limit:
            response = await client.get("/healthz")
            response.raise_for_status()

    started = time.perf_counter()
    await asyncio.gather(*(hit() for _ in range(requests)))
    return requests / (time.perf_counter() - started)


async def run_herd(base_url: str, clock: FakeClock, herd: Herd, concurrency: int) -> float:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=120) as client:
        round_number = 0
        while herd.pending:
            round_at = SLOT_AT + timedelta(minutes=round_number)
            wait = (round_at - clock.now()).total_seconds() / clock.speed
            if wait > 0:
                await asyncio.sleep(wait)
            waiting = len(herd.pending)
            seconds = await burst(client, herd, concurrency)
            if round_at < SLOT_AT + WINDOW:
                herd.refusal_seconds += seconds
            print(
                f"  round {round_number:2d} ({round_at:%H:%M}Z): {waiting:5d} claims in "
                f"{seconds:5.2f} s (a round is {60 / clock.speed:.1f} s), "
                f"{len(herd.granted):5d} granted so far"
            )
            round_number += 1
        return await bare_baseline(client, max(1000, herd.refusals // 10), concurrency)


def grants_per_round(database_url: str) -> tuple[int, int, int]:
    with psycopg.connect(database_url) as conn:
        total = conn.execute(
            "SELECT coalesce(max(n), 0), count(*) FROM"
            " (SELECT round_start, count(*) AS n FROM tokens GROUP BY round_start) r"
        ).fetchone()
        per_org = conn.execute(
            "SELECT coalesce(max(n), 0) FROM (SELECT t.round_start, r.org_id, count(*) AS n"
            " FROM tokens t JOIN runs r ON r.id = t.run_id GROUP BY 1, 2) g"
        ).fetchone()
    assert total is not None and per_org is not None
    return int(per_org[0]), int(total[0]), int(total[1])


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=4000)
    parser.add_argument("--orgs", type=int, default=100)
    parser.add_argument(
        "--speed",
        type=float,
        default=None,
        help="fake clock speed (default: a round of about one real second per 100 agents)",
    )
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight (64)")
    args = parser.parse_args()
    speed = args.speed or 60 / max(5.0, args.agents / 100)

    home = Path(tempfile.mkdtemp(prefix="nachtwacht-herd-"))
    home.chmod(0o755)  # the embedded server runs as its own user when the bench runs as root
    embedded = EmbeddedDatabase(home)
    try:
        database_url = embedded.start()
        print(f"seeding {args.agents} agents in {args.orgs} organisations …")
        fleet, tracks = seed(database_url, args.agents, args.orgs, home)
        # Ten product seconds before 03:00, so every agent's first claim is in the slot's round.
        clock = NightClock.starting(
            SLOT_AT - timedelta(seconds=10), speed=speed, lead_seconds=2
        ).fake()
        herd = Herd(pending=dict(fleet), tracks=tracks)
        log = Path(tempfile.gettempdir()) / "nachtwacht-herd-control-plane.log"
        log.unlink(missing_ok=True)
        plane = start_control_plane(
            stderr_path=log,
            database_url=database_url,
            fake_clock=clock.setting(),
            args=["--no-migrate", "--pool-size", "10"],
        )
        try:
            print(f"control plane log: {log}")
            print(f"control plane at {plane.base_url}, {clock.describe()}")
            bare_rps = asyncio.run(run_herd(plane.base_url, clock, herd, args.concurrency))
        finally:
            plane.stop()
        max_org, max_total, rounds = grants_per_round(database_url)
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)

    refusal_rps = herd.refusals / herd.refusal_seconds if herd.refusal_seconds else 0.0
    reasons = Counter(herd.missed.values())
    print()
    print(f"agents {args.agents} in {args.orgs} orgs; caps: 5 per org per round, 25 per round")
    print(f"grants per round: per org max {max_org}, total max {max_total} ({rounds} rounds)")
    print(f"granted {len(herd.granted)}, missed {len(herd.missed)}")
    for (channel, platform), count in sorted(herd.grants_per_pair.items()):
        print(f"  granted on {channel}/{platform}: {count}")
    print(f"grants that carried another pair's release: {herd.wrong_pair}")
    for reason, count in reasons.most_common():
        print(f"  missed because the last answer was {reason}: {count}")
    forecast = forecast_slot(
        Counter(fleet.values()), org_cap=5, global_cap=25, window_minutes=int(WINDOW.seconds // 60)
    )
    print(
        f"forecast (control_plane.forecast.model.forecast_slot, as GET /v1/admin/forecast): "
        f"capacity {forecast.capacity}, can update {forecast.can_update}, "
        f"will miss {forecast.will_miss}"
    )
    difference = len(herd.granted) - forecast.can_update
    verdict = "agrees with the forecast" if difference == 0 else f"DIFFERS by {difference:+d}"
    print(f"observed: updated {len(herd.granted)}, missed {len(herd.missed)} -> {verdict}")
    if herd.refusal_latencies:
        p50 = percentile(herd.refusal_latencies, 0.50) * 1000
        p99 = percentile(herd.refusal_latencies, 0.99) * 1000
        print(f"refusal path: {refusal_rps:8.0f} requests/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"bare /healthz: {bare_rps:8.0f} requests/s (same server, same concurrency)")
    if bare_rps:
        print(f"ratio refusal / bare: {refusal_rps / bare_rps:.2f}")
    if herd.other_answers:
        print(f"unexpected answers: {dict(herd.other_answers)}")
    if herd.transport_errors:
        print(f"transport errors (retried next round): {dict(herd.transport_errors)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
