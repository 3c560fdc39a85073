"""Point-in-time recovery: a base backup and the archived WAL, replayed up to a restore point.

A primary archives its WAL (`tests.worlds.replicated_postgres.archived_primary`); a control
plane serves on it while `pg_basebackup` copies it; the night goes on — a grant between the
backup and the restore point, a grant and a switch after it — and the primary is killed. The
backup is restored into a new data directory with `restore_command`, `recovery_target_name` and
`recovery.signal`, promoted at the restore point onto a new timeline of the same cluster, and
`nachtwacht control after-restore` revokes what it still holds. The replica that was serving on
the old primary does not use the restored server (same cluster, newer timeline, but started with
a recovery target) until `after-restore` has run: meanwhile it answers 503, and the token the
restore revokes never gets a permit. It then follows the restored server, and the next night
completes on a replica started afresh, over real HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import psycopg
import pytest

from control_plane.database_fence import DatabaseFence, FencedServer, read_position
from ground.clock import FAKE_CLOCK_ENV
from nachtwacht.demo_world.children import run_nachtwacht
from tests.conftest import RunningControlPlane
from tests.control_plane.test_backup_restore import FleetAgent, frozen_at, seed_fleet
from tests.worlds.processes import FORKED
from tests.worlds.replicated_postgres import ArchivedPrimary, PostgresNode, archived_primary
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

NIGHT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 in Amsterdam
NIGHT_KEY = "2026-11-30T03:00"
NEXT_NIGHT_KEY = "2026-12-01T03:00"
ORG_CAP = 3
CAPS = ["--org-cap", str(ORG_CAP), "--global-cap", "100"]
RESTORE_POINT = "before-the-forgotten-grant"
# A deadline for a failure, not a speed expectation.
DEADLINE_SECONDS = 60.0


@pytest.fixture
def servers() -> Iterator[ArchivedPrimary]:
    with archived_primary() as servers:
        yield servers


def _night(url: str, slot_key: str) -> dict[str, Any]:
    """The night's runs by agent name, and its tokens and grant counts, as the database has them."""
    with psycopg.connect(url) as conn:
        runs = conn.execute(
            "SELECT a.name, r.status FROM runs r JOIN agents a ON a.id = r.agent_id"
            " WHERE r.slot_key = %s",
            [slot_key],
        ).fetchall()
        tokens = conn.execute(
            "SELECT a.name, t.revoked_reason FROM tokens t JOIN runs r ON r.id = t.run_id"
            " JOIN agents a ON a.id = t.agent_id WHERE r.slot_key = %s",
            [slot_key],
        ).fetchall()
        granted = conn.execute(
            "SELECT round_start, granted FROM claim_rounds_org ORDER BY round_start"
        ).fetchall()
    return {"runs": dict(runs), "tokens": dict(tokens), "granted": granted}


def test_a_base_backup_restored_to_a_restore_point_serves_the_next_night(
    servers: ArchivedPrimary,
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    primary = servers.primary
    # The replica of night one, on the primary's URL (it migrates the new database).
    night_one = frozen_at("2026-11-30T02:01:00Z")
    old = control_plane_server(database_url=primary.url, fake_clock=night_one, args=CAPS)
    release, keys = seed_fleet(primary.url, ("held", "replayed", "forgotten", "late"))
    fleet = {name: FleetAgent(name, key, old.base_url) for name, key in keys.items()}
    # What the replica remembers of its database: the old primary's cluster and timeline.
    remembered = DatabaseFence(primary.url)
    with remembered.connect() as conn:
        before = read_position(conn)
    assert before.timeline == 1 and not before.standby

    # Night one: a grant, the base backup while the replica serves, a grant only the WAL holds.
    held = fleet["held"].claim(NIGHT_KEY)
    assert held.status_code == 201, held.text
    held_run = held.json()["run_id"]
    backup = servers.home / "backup"
    servers.base_backup(backup)
    replayed = fleet["replayed"].claim(NIGHT_KEY)
    assert replayed.status_code == 201, replayed.text
    replayed_run = replayed.json()["run_id"]
    with psycopg.connect(primary.url, autocommit=True) as conn:
        conn.execute("SELECT pg_create_restore_point(%s)", [RESTORE_POINT])
    # After the restore point: a grant the restore forgets, a switch it never hears of.
    forgotten = fleet["forgotten"].claim(NIGHT_KEY)
    assert forgotten.status_code == 201, forgotten.text
    forgotten_run = forgotten.json()["run_id"]
    assert fleet["replayed"].download(replayed_run).status_code == 200
    assert fleet["replayed"].confirm(replayed_run).status_code == 200
    assert fleet["replayed"].report(replayed_run, "2026-11-30T02:01:30Z").status_code == 200
    # Everything written so far is in the archive: the restore could replay past the point.
    servers.archive_current_wal()
    assert _night(primary.url, NIGHT_KEY)["runs"] == {
        "held": "claimed",
        "replayed": "succeeded",
        "forgotten": "claimed",
    }
    servers.kill(primary)

    # The restore: the base backup in a new data directory, on the old primary's address.
    restored = PostgresNode("restored", servers.home / "restored", primary.port)
    servers.restore(
        backup,
        restored,
        settings={"recovery_target_name": RESTORE_POINT, "recovery_target_action": "promote"},
    )
    wait_until(
        lambda: servers.is_writable(restored),
        what="the restored server promoted at the restore point",
        timeout=DEADLINE_SECONDS,
    )
    # Exactly the restore point: the grant between the backup and the point (replayed from the
    # archive) is there, the switch and the grant after it are not.
    at_point = _night(restored.url, NIGHT_KEY)
    assert at_point["runs"] == {"held": "claimed", "replayed": "claimed"}
    assert at_point["tokens"] == {"held": None, "replayed": None}
    assert [granted for _, granted in at_point["granted"]] == [2]
    with psycopg.connect(restored.url) as conn:
        after = read_position(conn)
    # The same cluster on a new timeline, like a promotion — but started with a recovery target.
    assert after.system == before.system
    assert after.timeline == 2 and not after.standby
    assert after.recovery_target == f"recovery_target_name = '{RESTORE_POINT}'"
    with pytest.raises(FencedServer, match="after-restore` has not run"):
        remembered.connect()
    assert remembered.newest == after  # learned, not used: the old primary is behind it now

    # The replica that served the old primary, never restarted, does not use the restored
    # server before `after-restore`: the token the restore is about to revoke gets no permit.
    # (Several asks, so the pool has tried to reconnect more than once.)
    for _ in range(5):
        early = fleet["held"].confirm(held_run)
        assert early.status_code == 503, early.text
        assert early.json()["detail"]["code"] == "database_unavailable"
    wait_until(
        lambda: "`nachtwacht control after-restore` has not run on it" in old.stderr(),
        what="the old replica to say why it does not use the restored server",
        timeout=DEADLINE_SECONDS,
    )

    done = json.loads(
        run_nachtwacht(
            "control",
            "after-restore",
            "--json",
            "--database-url",
            restored.url,
            env={FAKE_CLOCK_ENV: night_one},
            launcher=FORKED,
        )
    )
    # Both grants on record at the restore point were still outstanding there.
    assert done["tokens_revoked"] == 2
    assert _night(restored.url, NIGHT_KEY)["tokens"] == {"held": "restore", "replayed": "restore"}
    # The restored server is production now, its recovery target still set: `migrate --check`
    # runs against it before the next upgrade (docs/upgrading.md). Its scratch database is new,
    # with no record of any restore: it must not be fenced as an unfinished restore.
    checked = run_nachtwacht(
        "control", "migrate", "--check", "--database-url", restored.url, launcher=FORKED
    )
    assert checked.startswith("ok: "), checked

    # Once `after-restore` has run, the same replica uses the restored server and refuses what
    # it revoked.
    def answered_by_database() -> httpx.Response | None:
        answer = fleet["held"].confirm(held_run)
        return None if answer.status_code == 503 else answer

    refused = wait_until(
        answered_by_database,
        what="the old replica to reach the restored server",
        timeout=DEADLINE_SECONDS,
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["detail"]["code"] == "token_revoked"
    unknown = fleet["forgotten"].confirm(forgotten_run)
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["detail"]["code"] == "run_not_found"
    stderr = old.stderr()
    assert "on timeline 2 (was 1): following the promotion" in stderr, stderr
    assert "FENCED" in stderr, stderr
    assert old.stop() == 0

    # The next night, on a replica started afresh: the cap counts exactly, everyone completes.
    night = control_plane_server(
        database_url=restored.url, fake_clock=frozen_at("2026-12-01T02:01:00Z"), args=CAPS
    )
    for agent in fleet.values():
        agent.base_url = night.base_url
        assert agent.poll().status_code == 200
    for name in ("held", "replayed", "forgotten"):
        fleet[name].update(NEXT_NIGHT_KEY, release, "2026-12-01T02:01:30Z")
    full = fleet["late"].claim(NEXT_NIGHT_KEY)
    assert full.status_code == 429, full.text
    assert "Traceback" not in night.stderr(), night.stderr()
    assert night.stop() == 0
    next_round = control_plane_server(
        database_url=restored.url, fake_clock=frozen_at("2026-12-01T02:02:00Z"), args=CAPS
    )
    fleet["late"].base_url = next_round.base_url
    fleet["late"].update(NEXT_NIGHT_KEY, release, "2026-12-01T02:02:30Z")
    assert "Traceback" not in next_round.stderr(), next_round.stderr()
    next_night = _night(restored.url, NEXT_NIGHT_KEY)
    assert next_night["runs"] == dict.fromkeys(fleet, "succeeded")
    assert [granted for _, granted in next_night["granted"]] == [2, ORG_CAP, 1]
