"""The thundering herd at 03:00: N agents in M organisations claim the same slot, round after round.

The control plane runs as a real process (`nachtwacht control serve`, `--workers` processes) on
the embedded PostgreSQL, on a fake clock running `--speed` times real time, so a 15-minute window
passes in minutes. At the start of every round (one minute of the server's clock) each agent still
waiting posts its claim once; a 201 is a grant, a 429 waits for the next round, a 409
`window_closed` is a miss. The claims are sent by wrk, a compiled load generator
(`bench/wrk_burst.py`: every waiting agent's own credential and body, each sent once), so the
client is not what is measured; its CPU share is printed. Printed:

- grants per round, per organisation (max) and in total (max): the caps, held exactly;
- each round's burst: claims, seconds, the answers by status and refusal code, wrk's CPU;
- the refusal path: claims per second within the window's bursts, and p50/p99 latency;
- the baseline: right after each round's burst, as many `/healthz` requests sent the same way
  (same connections) to the same server, and the ratio, per round and for the window;
- each round split at its last grant's answer (`bench/wrk_burst.py`, "the cut"): until then the
  round's count is unknown and its claims wait for its grants; after it every claim is refused
  from memory — the refusal path, whose rate is printed beside the bare burst's after its first
  answer (each connection's request in flight at the cut not counted), per round and for the
  window, with how long the grants took;
- the server's CPU over each burst (`bench/process_cpu.py`): the control plane's processes, the
  database's, and how busy the machine's cores were — a machine near 100 % busy is CPU-bound, and
  the split says where the time went — per round, and for the window's bursts and the baseline;
- each agent follows one of two channels on one of two platforms (four pairs, each with its own
  release): grants per pair, and how many grants carried another pair's release (must be 0);
- how many agents missed the window and why, beside the forecast. With the default caps the
  answer is not zero: `global cap x window` (25 x 15 = 375) bounds one slot, and the control
  plane forecasts the rest as misses.

Who was granted is read from the database after each round (the tokens and their runs), not from
the answers: a claim whose answer was lost is still counted if the server granted it.

    PYTHONPATH=. .venv/bin/python bench/herd.py [--agents 4000] [--orgs 100] [--speed S]
        [--concurrency 64] [--workers N]

`--speed` must leave one round (60/speed real seconds) longer than one burst of claims; by default
it allows a real second per 250 agents (at least 4 s). Each burst's duration is printed, so an
overrun shows.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg

from bench.process_cpu import CpuUse, snapshot
from bench.wrk_burst import Burst, machine_cores, run_burst
from bench.wrk_load import Request, require_wrk
from control_plane.database import open_pool
from control_plane.forecast.model import forecast_slot
from control_plane.registry import build_services
from control_plane.settings.services import PlatformSettings
from ground.clock import FakeClock
from ground.contract import CHANNEL_PARAM, CONFIG_PATH, PLATFORM_PARAM, RefusalCode
from nachtwacht.demo_world.clocks import NightClock
from nachtwacht.demo_world.control_planes import start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase
from tests.worlds.releases import ReleaseFactory

SLOT_KEY = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 CET
# When the fleet is enrolled and its releases published: the day before the slot, so the slot is
# each agent's (a slot whose window closed before an agent was enrolled never was).
SEEDED_AT = SLOT_AT - timedelta(days=1)
WINDOW = timedelta(minutes=15)
# Two channels on two platforms: every agent follows one pair, and each pair has its own release.
PAIRS = [
    (channel, platform)
    for channel in ("stable", "beta")
    for platform in ("linux-x86_64", "linux-aarch64")
]
# The version each pair's release carries, so a grant shows which pair's release it was.
PAIR_VERSIONS = {pair: f"1.5.{n}" for n, pair in enumerate(PAIRS)}


@dataclass(frozen=True, kw_only=True)
class Agent:
    agent_id: str
    key: str
    org_id: str
    pair: tuple[str, str]

    def poll(self) -> Request:
        """The config poll every agent sends every minute, all day."""
        channel, platform = self.pair
        return Request(
            method="GET",
            path=f"{CONFIG_PATH}?{CHANNEL_PARAM}={channel}&{PLATFORM_PARAM}={platform}",
            headers={"Authorization": f"Bearer {self.key}"},
        )

    def claim(self) -> Request:
        channel, platform = self.pair
        return Request(
            method="POST",
            path="/v1/agent/claims",
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
            body=json.dumps(
                {
                    "slot_key": SLOT_KEY,
                    "from_version": "1.4.1",
                    "channel": channel,
                    "platform": platform,
                }
            ),
        )


@dataclass
class Herd:
    pending: dict[str, Agent]  # agent id -> agent
    granted: dict[str, str] = field(default_factory=dict)  # agent id -> version granted
    missed: int = 0
    missed_because: Counter[str] = field(default_factory=Counter)
    window_bursts: list[Burst] = field(default_factory=list)
    bare_bursts: list[Burst] = field(default_factory=list)  # beside each window burst
    # The server's and the database's CPU over each window burst and each bare one.
    window_cpu: list[CpuUse] = field(default_factory=list)
    bare_cpu: list[CpuUse] = field(default_factory=list)
    bursts: list[Burst] = field(default_factory=list)
    unexpected: Counter[int] = field(default_factory=Counter)
    grants_per_pair: Counter[tuple[str, str]] = field(default_factory=Counter)
    wrong_pair: int = 0
    closed_answers: int = 0  # the 409 window_closed answers of the last round (closing or closed)


def seed(database_url: str, agents: int, orgs: int, workdir: Path) -> list[Agent]:
    """Organisations, agents (all on the default schedule, each following one pair, round
    robin) and one published release per pair."""
    factory = ReleaseFactory(workdir=workdir, issued_at=datetime(2026, 11, 1, tzinfo=UTC))
    pool = open_pool(database_url, min_size=1, max_size=2)
    try:
        services = build_services(pool, factory.trusted)
        now = SEEDED_AT
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
        org_ids = [
            services.accounts.create_org(f"org-{n:03d}", now=now).org_id for n in range(orgs)
        ]
        fleet = []
        for n in range(agents):
            org_id = org_ids[n % orgs]
            issued = services.accounts.enroll_agent(org_id, f"agent-{n:05d}", now=now)
            fleet.append(
                Agent(
                    agent_id=str(issued.agent_id),
                    key=issued.agent_key,
                    org_id=str(org_id),
                    pair=PAIRS[(n // orgs) % len(PAIRS)],
                )
            )
        return fleet
    finally:
        pool.close()


def grants(database_url: str) -> dict[str, str]:
    """Agent id -> the version of the release its token is for, for every grant of the slot."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT r.agent_id::text, rel.agent_version FROM tokens t"
            " JOIN runs r ON r.id = t.run_id JOIN releases rel ON rel.id = r.release_id"
            " WHERE r.slot_key = %s",
            (SLOT_KEY,),
        ).fetchall()
    return {agent_id: version for agent_id, version in rows}


def describe(burst: Burst) -> str:
    statuses = ", ".join(f"{status}: {n}" for status, n in sorted(burst.statuses.items()))
    codes = ", ".join(f"{code}: {n}" for code, n in burst.codes.most_common())
    unanswered = f", {burst.unanswered} unanswered" if burst.unanswered else ""
    errors = f", socket errors {burst.socket_errors}" if burst.socket_errors else ""
    return (
        f"[{statuses}] ({codes}){unanswered}{errors}, "
        f"wrk CPU {burst.client_cpu_seconds / burst.wall_seconds if burst.wall_seconds else 0:.2f}"
        " cores"
    )


def describe_cut(burst: Burst, beside: Burst) -> str:
    """A round's two parts: until its last grant (the claims wait for the grants while the
    round's count is unknown), then the refusals, against the bare burst's steady part."""
    refusals, bare = burst.rate_after_cut, beside.rate_after_cut
    if burst.cut_seconds is None or refusals is None or not bare:
        return "no grant in this burst, or too few answers after it to split it"
    return (
        f"the round's grants answered by {burst.cut_seconds * 1000:.0f} ms; after them the refusals"
        f" at {refusals:6.0f}/s, bare /healthz at {bare:6.0f}/s: ratio {refusals / bare:4.2f}"
    )


def run_herd(
    base_url: str,
    clock: FakeClock,
    herd: Herd,
    database_url: str,
    concurrency: int,
    servers: dict[str, int],
) -> None:
    """The rounds of the slot until every agent is through or its window closed; `servers`
    names the process trees whose CPU each window burst and its baseline are printed with."""
    round_seconds = 60 / clock.speed
    round_number = 0
    while herd.pending:
        round_at = SLOT_AT + timedelta(minutes=round_number)
        wait = (round_at - clock.now()).total_seconds() / clock.speed
        if wait > 0:
            time.sleep(wait)
        waiting = list(herd.pending.values())
        claims = [agent.claim() for agent in waiting]
        before = snapshot(servers)
        # Cut at the round's last grant (201): the claims after it are the refusal path.
        burst = run_burst(
            base_url,
            claims,
            deadline_seconds=round_seconds,
            connections=concurrency,
            fill_status=201,
        )
        used = CpuUse.between(before, snapshot(servers))
        herd.bursts.append(burst)
        in_window = round_at < SLOT_AT + WINDOW
        bare = ""
        if in_window:
            herd.window_bursts.append(burst)
            # The baseline beside it: as many /healthz, sent the same way, right after (this
            # machine's load moves between minutes; one baseline burst at the end moved the
            # ratio by a factor of three between runs).
            health = Request(method="GET", path="/healthz", headers={})
            before = snapshot(servers)
            beside = run_burst(
                base_url, [health] * len(waiting), deadline_seconds=60, connections=concurrency
            )
            herd.bare_cpu.append(CpuUse.between(before, snapshot(servers)))
            herd.bare_bursts.append(beside)
            herd.window_cpu.append(used)
            ratio = burst.per_second / beside.per_second if beside.per_second else 0.0
            bare = (
                f"; bare /healthz {beside.seconds:5.2f} s, ratio {ratio:4.2f}"
                f"\n      {describe_cut(burst, beside)}"
                f"\n      CPU over the burst: {used.describe()}"
            )
        granted = grants(database_url)
        for agent in waiting:
            version = granted.get(agent.agent_id)
            if version is not None:
                del herd.pending[agent.agent_id]
                herd.granted[agent.agent_id] = version
                herd.grants_per_pair[agent.pair] += 1
                herd.wrong_pair += version != PAIR_VERSIONS[agent.pair]
        herd.unexpected.update(
            {s: n for s, n in burst.statuses.items() if s not in {200, 201, 409, 429}}
        )
        print(
            f"  round {round_number:2d} ({round_at:%H:%M}Z): {len(waiting):5d} claims in "
            f"{burst.seconds:5.2f} s (a round is {round_seconds:.1f} s), "
            f"{len(herd.granted):5d} granted so far {describe(burst)}{bare}"
        )
        if not in_window and not burst.statuses.get(201):
            # Every agent still waiting was told its window closed (or had no answer): each
            # missed it, and the reason is the answer it had last, in the window's last round.
            herd.missed = len(herd.pending)
            herd.missed_because = Counter(herd.window_bursts[-1].codes)
            unexplained = herd.missed - sum(herd.missed_because.values())
            if unexplained > 0:
                herd.missed_because["never answered in time"] += unexplained
            herd.closed_answers = burst.codes.get(RefusalCode.WINDOW_CLOSED, 0)
            herd.pending.clear()
        round_number += 1


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=4000)
    parser.add_argument("--orgs", type=int, default=100)
    parser.add_argument(
        "--speed",
        type=float,
        default=None,
        help="fake clock speed (default: a round of a real second per 250 agents, at least 4 s)",
    )
    parser.add_argument("--concurrency", type=int, default=64, help="wrk's connections (64)")
    parser.add_argument(
        "--workers", type=int, default=machine_cores(), help="server processes (the cores)"
    )
    args = parser.parse_args()
    require_wrk()
    speed = args.speed or 60 / max(4.0, args.agents / 250)
    cores = machine_cores()
    began = time.perf_counter()

    home = Path(tempfile.mkdtemp(prefix="nachtwacht-herd-"))
    home.chmod(0o755)  # the embedded server runs as its own user when the bench runs as root
    embedded = EmbeddedDatabase(home)
    try:
        database_url = embedded.start()
        print(f"seeding {args.agents} agents in {args.orgs} organisations …")
        fleet = seed(database_url, args.agents, args.orgs, home)
        print(f"seeded in {time.perf_counter() - began:.0f} s")
        # Before 03:00 every agent polls its config once, as it does every minute all day: the
        # workers have served before the herd comes (a fresh worker's first requests pay for
        # its lazy set-up, which a control plane at 03:00 has long done). The claims' facts are
        # not warmed by it.
        clock = NightClock.starting(
            SLOT_AT - timedelta(seconds=40), speed=speed, lead_seconds=2
        ).fake()
        herd = Herd(pending={agent.agent_id: agent for agent in fleet})
        log = Path(tempfile.gettempdir()) / "nachtwacht-herd-control-plane.log"
        log.unlink(missing_ok=True)
        plane = start_control_plane(
            stderr_path=log,
            database_url=database_url,
            fake_clock=clock.setting(),
            args=["--no-migrate", "--pool-size", "10"],
            workers=args.workers,
        )
        try:
            print(f"control plane log: {log}")
            print(f"control plane at {plane.base_url} ({args.workers} workers), {clock.describe()}")
            polls = run_burst(
                plane.base_url,
                [agent.poll() for agent in fleet],
                deadline_seconds=60,
                connections=args.concurrency,
            )
            print(
                f"  before 03:00: {polls.answered} config polls in {polls.seconds:.2f} s "
                f"{dict(sorted(polls.statuses.items()))}"
            )
            # The postmaster's pid is the first line of its pid file; its backends are its
            # children. The control plane's workers are children of its process.
            postmaster = int((embedded.pgdata / "postmaster.pid").read_text().split()[0])
            servers = {"control plane": plane.pid, "PostgreSQL": postmaster}
            run_herd(plane.base_url, clock, herd, database_url, args.concurrency, servers)
        finally:
            plane.stop()
        max_org, max_total, rounds = grants_per_round(database_url)
    finally:
        embedded.stop()
        shutil.rmtree(home, ignore_errors=True)

    window_claims = sum(b.answered for b in herd.window_bursts)
    window_seconds = sum(b.seconds for b in herd.window_bursts)
    window_cpu = sum(b.client_cpu_seconds for b in herd.window_bursts)
    claims_rps = window_claims / window_seconds if window_seconds else 0.0
    print()
    print(f"agents {args.agents} in {args.orgs} orgs; caps: 5 per org per round, 25 per round")
    print(f"grants per round: per org max {max_org}, total max {max_total} ({rounds} rounds)")
    print(
        f"granted {len(herd.granted)}, missed {herd.missed} "
        f"({herd.closed_answers} answered {RefusalCode.WINDOW_CLOSED} at the window's end)"
    )
    for (channel, platform), count in sorted(herd.grants_per_pair.items()):
        print(f"  granted on {channel}/{platform}: {count}")
    print(f"grants that carried another pair's release: {herd.wrong_pair}")
    for reason, count in herd.missed_because.most_common():
        print(f"  missed because the last answer was {reason}: {count}")
    forecast = forecast_slot(
        Counter(agent.org_id for agent in fleet),
        org_cap=5,
        global_cap=25,
        # The rounds that can grant: the window less its grant margin, as the forecast counts.
        window_minutes=PlatformSettings(org_cap=5, global_cap=25).grant_rounds,
    )
    print(
        f"forecast (control_plane.forecast.model.forecast_slot, as GET /v1/admin/forecast): "
        f"capacity {forecast.capacity}, can update {forecast.can_update}, "
        f"will miss {forecast.will_miss}"
    )
    difference = len(herd.granted) - forecast.can_update
    verdict = "agrees with the forecast" if difference == 0 else f"DIFFERS by {difference:+d}"
    print(f"observed: updated {len(herd.granted)}, missed {herd.missed} -> {verdict}")
    p50 = sorted(b.p50_ms for b in herd.window_bursts)[len(herd.window_bursts) // 2]
    p99 = max(b.p99_ms for b in herd.window_bursts)
    print(
        f"claims in the window's bursts: {claims_rps:8.0f} requests/s "
        f"(median burst p50 {p50:.1f} ms, worst burst p99 {p99:.1f} ms)"
    )
    bare_answered = sum(b.answered for b in herd.bare_bursts)
    bare_seconds = sum(b.seconds for b in herd.bare_bursts)
    bare_rps = bare_answered / bare_seconds if bare_seconds else 0.0
    print(
        f"bare /healthz beside each burst: {bare_rps:8.0f} requests/s "
        f"({bare_answered} in {len(herd.bare_bursts)} bursts; same server, connections, client)"
    )
    if bare_rps:
        print(f"ratio claims / bare: {claims_rps / bare_rps:.2f}")
        ratios = [
            burst.per_second / beside.per_second
            for burst, beside in zip(herd.window_bursts, herd.bare_bursts, strict=True)
            if beside.per_second
        ]
        print(
            "per round, claims/s / bare:  "
            + " ".join(f"{ratio:.2f}" for ratio in ratios)
            + f"  (median {statistics.median(ratios):.2f}, {min(ratios):.2f}-{max(ratios):.2f})"
        )
        # The round split at its last grant: the refusal path is what comes after it (each
        # connection's request in flight at the cut left out), the grants' part is before it.
        pairs = [
            (burst, beside)
            for burst, beside in zip(herd.window_bursts, herd.bare_bursts, strict=True)
            if burst.rate_after_cut and beside.rate_after_cut
        ]
        if pairs:
            refused = sum(b.answers_after_cut - b.connections for b, _ in pairs)
            refused_seconds = sum(b.seconds_after_cut or 0.0 for b, _ in pairs)
            steady = sum(b.answers_after_cut - b.connections for _, b in pairs)
            steady_seconds = sum(b.seconds_after_cut or 0.0 for _, b in pairs)
            refusals_rps, steady_rps = refused / refused_seconds, steady / steady_seconds
            cut_ratios = [(b.rate_after_cut or 0.0) / (s.rate_after_cut or 1.0) for b, s in pairs]
            low, high = min(cut_ratios), max(cut_ratios)
            fills = [b.cut_seconds * 1000 for b, _ in pairs if b.cut_seconds is not None]
            print(
                f"the refusal path after each round's last grant: {refusals_rps:8.0f} requests/s,"
                f" bare /healthz after its first answer {steady_rps:8.0f} requests/s: ratio"
                f" {refusals_rps / steady_rps:.2f} (per round median"
                f" {statistics.median(cut_ratios):.2f}, {low:.2f}-{high:.2f};"
                f" {len(pairs)} of {len(herd.window_bursts)} rounds)"
            )
            print(
                f"per round, the grants answered by: median {statistics.median(fills):.0f} ms"
                f" ({min(fills):.0f}-{max(fills):.0f} ms) from the burst's first claim"
            )
        # What a round costs beyond a bare burst of the same size: less moved by the machine's
        # load than a ratio (a loaded baseline flatters every ratio).
        excess = [
            burst.seconds - beside.seconds
            for burst, beside in zip(herd.window_bursts, herd.bare_bursts, strict=True)
        ]
        print(
            f"per round, burst - bare: median {statistics.median(excess) * 1000:.0f} ms "
            f"({min(excess) * 1000:.0f}-{max(excess) * 1000:.0f} ms)"
        )
    # wrk's CPU over its whole run, launch and script included (its own burst time leaves
    # them out): a client near a core shows itself, never less busy than it was.
    window_wall = sum(b.wall_seconds for b in herd.window_bursts)
    bare_wall = sum(b.wall_seconds for b in herd.bare_bursts)
    client = window_cpu / window_wall if window_wall else 0.0
    bare_cpu = sum(b.client_cpu_seconds for b in herd.bare_bursts)
    print(
        f"client (wrk) CPU during the window's bursts: {client:.2f} cores "
        f"({100 * client / cores:.0f} % of {cores}); during the baseline: "
        f"{bare_cpu / bare_wall if bare_wall else 0:.2f} cores"
    )
    # Whether the server, not the code, set the pace: a machine near 100 % busy during the
    # bursts is CPU-bound, and what each tree took of it says where the time went.
    print(
        f"server CPU over the window's bursts: {CpuUse.over(herd.window_cpu).describe()}; "
        f"over the baseline: {CpuUse.over(herd.bare_cpu).describe()}"
    )
    if herd.unexpected:
        print(f"unexpected answers: {dict(herd.unexpected)}")
    print(f"the whole run took {time.perf_counter() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
