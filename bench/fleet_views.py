"""The operators' and the panel's reads at fleet size: every page and API read, its median.

Seeds `--agents` agents (10,000) in `--orgs` organisations (250), the first of them holding
`--big-org` agents (2,000), straight into the embedded PostgreSQL (then ANALYZEd, as a serving
database is), their schedules as in `fleet.py` (most organisations at 03:00, some at several
times a day or another time in the night) and one agent in twenty with one of its own; three
pairs, each with a history of releases — one whose current release is a canary in its second
wave, one whose canary is halted, one whose current release is under its own brake beside a
withdrawn one — agents on every pair and some never seen, pins per organisation (a version, and
"hold at what it runs") and per agent, holds, canaries marked per agent and per organisation,
and a year of nightly notifications for the big organisation. Then starts `nachtwacht control
serve` (one worker) and reads each page `--repeats` times in turn (one warm-up read first, not
counted):

    operator API     /v1/admin/forecast, /v1/admin/rollout, /v1/admin/releases,
                     /v1/admin/orgs/{big}/agent-releases, /v1/admin/agents/{id}/release,
                     /v1/admin/notices
    operator panel   /panel/operator (the fleet, the forecast's nights, the rollout),
                     /panel/operator/releases, /panel/operator/orgs/{big}, one agent's page
    panel API        /v1/agents, /v1/agents/{id}, /v1/agent-releases, /v1/forecast,
                     /v1/notifications   (the big organisation's)
    panel            /panel/agents, /panel/agents/{id}, /panel/notifications, /panel/forecast
    baseline         /healthz, read in the same turns

It prints each read's median and its ratio to the baseline's, the client's CPU, and whether the
targets hold: every read under 300 ms at the median; the big organisation's agent list, agent
page and notifications under 100 ms.

With `--baseline DIR` (a source tree of other code over the same schema, e.g. main's:
`git archive main | tar -x -C DIR`), a second server runs that code on the same database and
every read is taken on both in each turn, the order alternating from turn to turn; it prints
both medians and this code's over the baseline's.

    PYTHONPATH=. .venv/bin/python bench/fleet_views.py [--agents 10000] [--orgs 250]
        [--big-org 2000] [--repeats 7] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from uuid import UUID
from zoneinfo import ZoneInfo

import httpx
import psycopg
from psycopg.types.json import Jsonb

from bench.fleet import SCHEDULE_MIX
from bench.median_reads import Read, measure, report, signed_in
from control_plane.database import open_pool
from control_plane.events.trail import Actor
from control_plane.notifications.summary import notification_body
from control_plane.registry import Services, build_services
from nachtwacht.demo_world.children import SUBPROCESSES, Subprocesses, stop_process
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.databases import EmbeddedDatabase
from tests.worlds.releases import ReleaseFactory

OPERATOR = Actor(kind="operator", name="bench")
# Each pair's releases, oldest first: (version, stage, what happens to it after publishing).
PAIR_HISTORY: dict[tuple[str, str], list[tuple[str, str, str]]] = {
    ("stable", "linux-x86_64"): [
        ("1.0.0", "everyone", ""),
        ("1.1.0", "everyone", ""),
        ("1.2.0", "canary", "wave 2"),
    ],
    ("stable", "linux-aarch64"): [
        ("1.0.0", "everyone", ""),
        ("1.1.0", "canary", "halted"),
    ],
    ("beta", "linux-x86_64"): [
        ("1.1.0", "everyone", ""),
        ("1.2.0", "everyone", "withdrawn"),
        ("1.3.0", "everyone", "braked"),
    ],
}
PAIRS = list(PAIR_HISTORY)
# The schedules agents were given one by one, beside their organisation's.
OWN_SCHEDULES = (["01:00"], ["02:30"], ["04:00", "16:00"], ["23:30"], ["00:00", "06:00", "12:00"])
BIG_TARGET_MS = 100.0
TARGET_MS = 300.0


@dataclass(frozen=True, kw_only=True)
class World:
    operator_key: str
    panel_key: str
    big_org: UUID
    big_agent: UUID
    agents: int


def _publish(services: Services, factory: ReleaseFactory, now: datetime) -> None:
    artifact = os.urandom(16 * 1024)
    manifest_version = 0
    for (channel, platform), history in PAIR_HISTORY.items():
        for version, stage, then in history:
            manifest_version += 1
            signed = factory.sign(
                artifact,
                version=version,
                manifest_version=manifest_version,
                expires_in=timedelta(days=365),
                unpacked_size=len(artifact),
                channel=channel,
                platform=platform,
            )
            published = services.releases.publish(
                signed.manifest_bytes, signed.signature, signed.artifact, now=now, stage=stage
            )
            release_id = published.id
            if then == "wave 2":
                services.rollout.promote(
                    release_id, reason="bench: second wave", actor=OPERATOR, now=now, to_wave=2
                )
            elif then == "halted":
                services.rollout.halt(release_id, reason="bench: halted", actor=OPERATOR, now=now)
            elif then == "withdrawn":
                services.releases.withdraw(release_id, reason="bench: withdrawn", now=now)
            elif then == "braked":
                services.brake.set_release(
                    release_id, engaged=True, reason="bench: braked", actor=OPERATOR, now=now
                )


def seed(database_url: str, *, agents: int, orgs: int, big_org: int, workdir: Path) -> World:
    """The fleet (see the module's docstring), straight into the tables where a service would
    take minutes per thousand agents; releases, pins and canaries through the services."""
    rng = random.Random(10_000)
    factory = ReleaseFactory(workdir=workdir, issued_at=datetime(2026, 11, 1, tzinfo=UTC))
    now = datetime.now(UTC)
    pool = open_pool(database_url, min_size=1, max_size=2)
    try:
        services = build_services(pool, factory.trusted)
        _publish(services, factory, now)
        issued = [services.accounts.create_org(f"org-{n:03d}", now=now) for n in range(orgs)]
        operator_key = services.accounts.create_operator_key("bench")
    finally:
        pool.close()
    org_ids = [org.org_id for org in issued]
    # The big organisation first, the rest spread evenly over the others.
    owners = [org_ids[0]] * big_org + [org_ids[1 + n % (orgs - 1)] for n in range(agents - big_org)]
    versions = ["1.0.0", "1.1.0", "1.2.0", "1.3.0"]
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at, current_version, update_schedule_times)"
            " SELECT o, 'agent-' || lpad(n::text, 5, '0'), %s, v, t::jsonb"
            " FROM unnest(%s::uuid[], %s::int[], %s::text[], %s::text[]) AS a(o, n, v, t)"
            " RETURNING id, org_id",
            [
                now,
                owners,
                list(range(agents)),
                [rng.choice(versions) if rng.random() < 0.9 else None for _ in owners],
                _schedules(rng, org_ids, owners),
            ],
        ).fetchall()
        ids = [row[0] for row in rows]
        big_agents = [row[0] for row in rows if row[1] == org_ids[0]]
        # Most agents have asked (on their pair), some never did.
        tracked = [(i, PAIRS[n % len(PAIRS)]) for n, i in enumerate(ids) if rng.random() < 0.95]
        conn.execute(
            "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
            " SELECT * FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::timestamptz[])",
            [
                [i for i, _ in tracked],
                [p[0] for _, p in tracked],
                [p[1] for _, p in tracked],
                [now] * len(tracked),
            ],
        )
        # What each agent runs: its last night's run that names a version.
        night = now.replace(hour=2, minute=0, second=0, microsecond=0) - timedelta(days=1)
        reported = [(row[0], row[1]) for row in rows if rng.random() < 0.9]
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
            " created_at, finished_at)"
            " SELECT a, o, 'schedule', %s, %s, 'up_to_date', v, %s, %s"
            " FROM unnest(%s::uuid[], %s::uuid[], %s::text[]) AS r(a, o, v)",
            [
                night.strftime("%Y-%m-%dT%H:%M"),
                night,
                night,
                night,
                [a for a, _ in reported],
                [o for _, o in reported],
                [rng.choice(versions[:3]) for _ in reported],
            ],
        )
        conn.execute(
            "INSERT INTO canary_agents (agent_id, marked_at, marked_by)"
            " SELECT unnest(%s::uuid[]), %s, 'bench'",
            [rng.sample(ids, agents // 50), now],
        )
        conn.execute(
            "INSERT INTO canary_orgs (org_id, marked_at, marked_by)"
            " SELECT unnest(%s::uuid[]), %s, 'bench'",
            [org_ids[1:6], now],
        )
        conn.execute(
            "INSERT INTO holds (agent_id, until, reason, set_by, set_at)"
            " SELECT unnest(%s::uuid[]), %s, 'bench', 'operator', %s",
            [rng.sample(ids, agents // 50), now + timedelta(days=7), now],
        )
        conn.execute(
            "INSERT INTO pins (org_id, version, reason, set_at, set_by)"
            " VALUES (%s, '1.0.0', 'bench', %s, 'bench'), (%s, NULL, 'bench', %s, 'bench'),"
            " (%s, '1.1.0', 'bench', %s, 'bench')",
            [org_ids[6], now, org_ids[7], now, org_ids[8], now],
        )
        conn.execute(
            "INSERT INTO pins (agent_id, version, reason, set_at, set_by)"
            " SELECT a, v, 'bench', %s, 'bench' FROM unnest(%s::uuid[], %s::text[]) AS p(a, v)",
            [
                now,
                (pinned := rng.sample(ids, agents // 100)),
                [rng.choice(["1.0.0", "1.1.0", None]) for _ in pinned],
            ],
        )
        _notifications(conn, org_ids[0], now)
        # Statistics, as a database that has been serving has them: straight after a bulk
        # insert the planner would guess from an empty table until autovacuum comes by.
        conn.execute("ANALYZE")
    return World(
        operator_key=operator_key,
        panel_key=issued[0].panel_key,
        big_org=org_ids[0],
        big_agent=big_agents[len(big_agents) // 2],
        agents=agents,
    )


def _schedules(rng: random.Random, org_ids: list[UUID], owners: list[UUID]) -> list[str]:
    """Each agent's schedule as JSON: its organisation's, drawn from `fleet.py`'s mix (most keep
    03:00), and one agent in twenty with one of its own."""
    per_org: dict[UUID, list[str]] = {}
    for org in org_ids:
        pick, chosen = rng.random(), ["03:00"]
        for share, times in SCHEDULE_MIX:
            if pick < share:
                chosen = times or ["03:00"]
                break
            pick -= share
        per_org[org] = chosen
    return [
        json.dumps(rng.choice(OWN_SCHEDULES) if rng.random() < 0.05 else per_org[owner])
        for owner in owners
    ]


def _notifications(
    conn: psycopg.Connection[tuple[object, ...]], org_id: UUID, now: datetime
) -> None:
    """A year of nightly summaries (nothing to report in them: the page's cost is their number)."""
    zone = ZoneInfo("Europe/Berlin")
    slots = [
        now.replace(hour=2, minute=0, second=0, microsecond=0) - timedelta(days=d)
        for d in range(1, 366)
    ]
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO notifications (org_id, slot_key, slot_at, created_at, body)"
            " VALUES (%s, %s, %s, %s, %s)",
            [
                (
                    org_id,
                    key := slot.strftime("%Y-%m-%dT%H:%M"),
                    slot,
                    slot + timedelta(minutes=30),
                    Jsonb(
                        notification_body(
                            slot_key=key,
                            slot_at=slot,
                            zone=zone,
                            outcomes=(),
                            newly_named_failures=(),
                            stale=(),
                        )
                    ),
                )
                for slot in slots
            ],
        )


def reads(plane: RunningControlPlane, world: World) -> tuple[list[Read], list[httpx.Client]]:
    base = plane.base_url
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).date().isoformat()
    operator = httpx.Client(
        base_url=base, timeout=120, headers={"Authorization": f"Bearer {world.operator_key}"}
    )
    panel_api = httpx.Client(
        base_url=base, timeout=120, headers={"Authorization": f"Bearer {world.panel_key}"}
    )
    operator_panel = signed_in(base, world.operator_key)
    customer_panel = signed_in(base, world.panel_key)
    bare = httpx.Client(base_url=base, timeout=120)
    org, agent = world.big_org, world.big_agent

    def on(client: httpx.Client, path: str, **params: str) -> Callable[[], httpx.Response]:
        return lambda: client.get(path, params=params)

    listed = [
        Read(label="baseline /healthz", get=on(bare, "/healthz"), target_ms=TARGET_MS),
        Read(
            label="api  admin forecast",
            get=on(operator, "/v1/admin/forecast", date=tomorrow),
            target_ms=TARGET_MS,
        ),
        Read(
            label="api  admin rollout", get=on(operator, "/v1/admin/rollout"), target_ms=TARGET_MS
        ),
        Read(label="api  releases", get=on(operator, "/v1/admin/releases"), target_ms=TARGET_MS),
        Read(
            label="api  admin org agent-releases",
            get=on(operator, f"/v1/admin/orgs/{org}/agent-releases"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="api  admin agent release",
            get=on(operator, f"/v1/admin/agents/{agent}/release"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="api  admin notices", get=on(operator, "/v1/admin/notices"), target_ms=TARGET_MS
        ),
        Read(
            label="page operator (fleet)",
            get=on(operator_panel, "/panel/operator"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="page operator releases",
            get=on(operator_panel, "/panel/operator/releases"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="page operator org",
            get=on(operator_panel, f"/panel/operator/orgs/{org}"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="page operator agent",
            get=on(operator_panel, f"/panel/operator/orgs/{org}/agents/{agent}"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="page operator notices",
            get=on(operator_panel, "/panel/operator/notices"),
            target_ms=TARGET_MS,
        ),
        Read(label="api  agents", get=on(panel_api, "/v1/agents"), target_ms=TARGET_MS),
        Read(
            label="api  agent page", get=on(panel_api, f"/v1/agents/{agent}"), target_ms=TARGET_MS
        ),
        Read(
            label="api  agent-releases",
            get=on(panel_api, "/v1/agent-releases"),
            target_ms=TARGET_MS,
        ),
        Read(
            label="api  forecast",
            get=on(panel_api, "/v1/forecast", date=tomorrow),
            target_ms=TARGET_MS,
        ),
        Read(
            label="api  notifications", get=on(panel_api, "/v1/notifications"), target_ms=TARGET_MS
        ),
        Read(
            label="page agents (big org)",
            get=on(customer_panel, "/panel/agents"),
            target_ms=BIG_TARGET_MS,
        ),
        Read(
            label="page agent (big org)",
            get=on(customer_panel, f"/panel/agents/{agent}"),
            target_ms=BIG_TARGET_MS,
        ),
        Read(
            label="page notifications (big org)",
            get=on(customer_panel, "/panel/notifications"),
            target_ms=BIG_TARGET_MS,
        ),
        Read(
            label="page forecast (big org)",
            get=on(customer_panel, "/panel/forecast"),
            target_ms=TARGET_MS,
        ),
    ]
    return listed, [operator, panel_api, operator_panel, customer_panel, bare]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--orgs", type=int, default=250)
    parser.add_argument("--big-org", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a source tree whose server is measured beside this one on the same database",
    )
    options = parser.parse_args()
    if not options.orgs >= 2 or not 0 < options.big_org < options.agents:
        parser.error("--orgs must be 2 or more and --big-org between 1 and --agents - 1")
    with tempfile.TemporaryDirectory(prefix="nachtwacht-fleet-views-") as scratch:
        home = Path(scratch)
        database = EmbeddedDatabase(home / "pg")
        url = database.start()
        planes: list[RunningControlPlane] = []
        try:
            started = time.perf_counter()
            world = seed(
                url,
                agents=options.agents,
                orgs=options.orgs,
                big_org=options.big_org,
                workdir=home,
            )
            print(
                f"seeded {options.agents} agents in {options.orgs} organisations"
                f" (one of {options.big_org}) in {time.perf_counter() - started:.1f} s",
                flush=True,
            )
            launchers = [SUBPROCESSES]
            if options.baseline is not None:
                launchers.append(Subprocesses(checkout=options.baseline.resolve()))
            sides, clients = [], []
            for number, launcher in enumerate(launchers):
                plane = start_control_plane(
                    stderr_path=home / f"serve-{number}.log",
                    database_url=url,
                    args=["--no-migrate"],
                    launcher=launcher,
                )
                planes.append(plane)
                listed, opened = reads(plane, world)
                sides.append(listed)
                clients.extend(opened)
            cpu_before = time.process_time()
            wall_before = time.perf_counter()
            times = measure(sides, options.repeats)
            client_cpu = time.process_time() - cpu_before
            wall = time.perf_counter() - wall_before
            for client in clients:
                client.close()
            return report(sides[0], times, client_cpu, wall)
        finally:
            for plane in planes:
                stop_process(plane.process)
            database.stop()


if __name__ == "__main__":
    sys.exit(main())
