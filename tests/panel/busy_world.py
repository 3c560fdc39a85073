"""An organisation as a hoster's looks after months in production, for the screens' layout tests:
eighty agents with long names on schedules across the night, releases on three pairs, last
night's grants, outcomes and misses, an enrollment token, operator keys with long names."""

from __future__ import annotations

import json
from dataclasses import dataclass
from uuid import UUID

import psycopg

from tests.panel.conftest import PanelWorld
from tests.panel.operator_support import publish_releases

PAIRS = (
    ("stable", "linux-x86_64", "2.4.1"),
    ("beta", "linux-aarch64", "2.5.0-rc.2"),
    ("stable", "windows-x86_64", "2.4.0"),
)
# Hosts' names as hosters write them: long, dotted, without a space to break at.
LONG_NAME = "db-replica-frankfurt-rack-07-node-{:02d}.customer-infrastructure.example.internal"
AGENTS = 80
RUN_STATUSES = ("succeeded", "up_to_date", "failed", "rolled_back", "claimed", "missed")
MISS_REASONS = ("offline", "throttled", "brake", "unknown")


@dataclass(frozen=True)
class BusyWorld:
    world: PanelWorld
    operator_key: str
    agent_ids: tuple[str, ...]
    operator_key_id: str
    manual_run_id: str  # the first agent's update asked for this morning, failed


def busy_world(world: PanelWorld) -> BusyWorld:
    for number, (channel, platform, version) in enumerate(PAIRS):
        publish_releases(world, (version, 10 + number), channel=channel, platform=platform)
    operator_key = world.server.create_operator_key()
    with psycopg.connect(world.server.database_url) as conn:
        rows = conn.execute(
            "INSERT INTO agents (org_id, name, created_at, current_version,"
            " update_schedule_times, last_seen_at)"
            " SELECT %s, name, now() - interval '30 days', version, times::jsonb, now()"
            " FROM unnest(%s::text[], %s::text[], %s::text[]) AS t(name, version, times)"
            " RETURNING id",
            [
                UUID(world.org_id),
                [LONG_NAME.format(n) for n in range(AGENTS)],
                [PAIRS[n % len(PAIRS)][2] for n in range(AGENTS)],
                [json.dumps([f"0{1 + n % 4}:{5 * (n % 12):02d}"]) for n in range(AGENTS)],
            ],
        ).fetchall()
        agent_ids = tuple(str(row[0]) for row in rows)
        # Last night: a slot every five minutes from 01:00 UTC, each with every outcome.
        for n, agent_id in enumerate(agent_ids):
            status = RUN_STATUSES[n % len(RUN_STATUSES)]
            minute = 5 * (n % 24)
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                " miss_reason, version, created_at, finished_at) VALUES (%s, %s, 'schedule', %s,"
                " timestamptz '2027-03-26T01:00Z' + make_interval(mins => %s), %s, %s, %s,"
                " '2027-03-26T01:00Z', '2027-03-26T01:30Z')",
                [
                    UUID(agent_id),
                    UUID(world.org_id),
                    f"2027-03-26T{1 + minute // 60:02d}:{minute % 60:02d}",
                    minute,
                    status,
                    MISS_REASONS[n % len(MISS_REASONS)] if status == "missed" else None,
                    PAIRS[0][2],
                ],
            )
        # Last night's grants: a round a minute from 01:00 UTC for two hours.
        conn.execute(
            "INSERT INTO claim_rounds_global (round_start, granted)"
            " SELECT timestamptz '2027-03-26T01:00Z' + make_interval(mins => n), 1 + n % 17"
            " FROM generate_series(0, 119) AS n"
        )
        run_row = conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, status, version, error, created_at,"
            " claimed_at, finished_at) VALUES (%s, %s, 'manual', 'failed', %s, %s,"
            " '2027-03-26T10:00Z', '2027-03-26T10:01Z', '2027-03-26T10:03Z') RETURNING id",
            [
                UUID(agent_ids[0]),
                UUID(world.org_id),
                PAIRS[0][2],
                "health check of nachtwacht-agent.service failed after the swap: " + "x" * 120,
            ],
        ).fetchone()
        assert run_row is not None
        key_row = conn.execute(
            "INSERT INTO credentials (audience, secret_sha256, name, label, created_at)"
            " VALUES ('operator', repeat('a', 64), %s, %s, now()) RETURNING id",
            ["night-shift-operations-team-amsterdam@hosting.example"] * 2,
        ).fetchone()
        assert key_row is not None
    return BusyWorld(
        world=world,
        operator_key=operator_key,
        agent_ids=agent_ids,
        operator_key_id=str(key_row[0]),
        manual_run_id=str(run_row[0]),
    )
