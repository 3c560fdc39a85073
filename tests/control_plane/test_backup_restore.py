"""Backup and restore: a fleet mid-window is dumped with `pg_dump`, restored into a fresh
PostgreSQL server, and `nachtwacht control after-restore` revokes every token the restored
database still holds. No agent switches on a grant the restored database forgot or remembers,
and the next night the fleet polls, claims and completes as usual — over real HTTP."""

from __future__ import annotations

import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.database import open_pool
from control_plane.registry import build_services
from ground.clock import FAKE_CLOCK_ENV
from ground.contract import HOST_ID_HEADER
from nachtwacht.demo_world.children import run_nachtwacht
from signed_release.keys import key_id
from tests.conftest import RunningControlPlane
from tests.control_plane.conftest import SignedRelease, sign_release
from tests.worlds.processes import FORKED

pytestmark = pytest.mark.slow

NIGHT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 in Amsterdam
NIGHT_KEY = "2026-11-30T03:00"
NEXT_NIGHT_KEY = "2026-12-01T03:00"
CHANNEL = {"channel": "stable", "platform": "linux-x86_64"}
# Rows of the answers' change feed written by transactions this server has not reached yet.
_FEED_AHEAD = "SELECT count(*) FROM answer_changes WHERE xid > pg_current_xact_id()"


def frozen_at(instant: str) -> str:
    """A product clock that shows `instant` and barely moves: the test decides when time passes."""
    return f"{instant},anchor={time.time()!r},speed=0.001"


def seed_fleet(database_url: str, names: tuple[str, ...]) -> tuple[SignedRelease, dict[str, str]]:
    """A published release and one organisation's agents, `names`, with their keys."""
    key = Ed25519PrivateKey.generate()
    release = sign_release(key)
    pool = open_pool(database_url, min_size=1, max_size=1)
    try:
        services = build_services(pool, {key_id(key.public_key()): key.public_key()})
        services.releases.publish(release.manifest, release.signature, release.artifact, now=NIGHT)
        org = services.accounts.create_org("Acme", now=NIGHT)
        keys = {
            name: services.accounts.enroll_agent(org.org_id, name, now=NIGHT).agent_key
            for name in names
        }
    finally:
        pool.close()
    return release, keys


class FleetAgent:
    """One agent's calls, as the daemon makes them, over loopback HTTP."""

    def __init__(self, name: str, key: str, base_url: str) -> None:
        self.name = name
        self._headers = {"Authorization": f"Bearer {key}", HOST_ID_HEADER: f"host-{name}"}
        self.base_url = base_url

    def _client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self._headers, timeout=60)

    def poll(self) -> httpx.Response:
        with self._client() as client:
            return client.get("/v1/agent/config", params=CHANNEL)

    def claim(self, slot_key: str) -> httpx.Response:
        with self._client() as client:
            return client.post(
                "/v1/agent/claims", json={"slot_key": slot_key, "from_version": "1.4.1", **CHANNEL}
            )

    def download(self, run_id: str) -> httpx.Response:
        with self._client() as client:
            return client.get(f"/v1/agent/runs/{run_id}/artifact")

    def confirm(self, run_id: str) -> httpx.Response:
        with self._client() as client:
            return client.post(f"/v1/agent/runs/{run_id}/confirm")

    def report(self, run_id: str, switched_at: str) -> httpx.Response:
        with self._client() as client:
            return client.patch(
                f"/v1/agent/runs/{run_id}",
                json={"status": "succeeded", "version": "1.5.0", "switched_at": switched_at},
            )

    def up_to_date(self, slot_key: str) -> httpx.Response:
        with self._client() as client:
            return client.post(
                "/v1/agent/runs",
                json={"slot_key": slot_key, "status": "up_to_date", "version": "1.5.0"},
            )

    def update(self, slot_key: str, release: SignedRelease, switched_at: str) -> str:
        """A whole update: claim, download, the permit, the switch, the report."""
        granted = self.claim(slot_key)
        assert granted.status_code == 201, (self.name, granted.text)
        run_id: str = granted.json()["run_id"]
        artifact = self.download(run_id)
        assert artifact.status_code == 200, artifact.text
        assert artifact.content == release.artifact
        permit = self.confirm(run_id)
        assert permit.status_code == 200, permit.text
        reported = self.report(run_id, switched_at)
        assert reported.status_code == 200, reported.text
        return run_id


@pytest.fixture
def fresh_server(embedded_data_dir: Path) -> Iterator[Any]:
    """A second PostgreSQL server, new and empty: the machine the backup is restored on."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # platformdirs: no XDG_RUNTIME_DIR
        import pgserver

    server = pgserver.get_server(embedded_data_dir / "pgdata", cleanup_mode="stop")
    try:
        yield server
    finally:
        server.cleanup()


def _postgres_tool(name: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        from pgserver import _commands

    return str(Path(_commands.POSTGRES_BIN_PATH) / name)


def _control(*args: str, database_url: str, clock: str) -> Any:
    import json

    output = run_nachtwacht(
        "control",
        *args,
        "--json",
        "--database-url",
        database_url,
        env={FAKE_CLOCK_ENV: clock},
        launcher=FORKED,
    )
    return json.loads(output)


def test_a_restored_fleet_switches_on_no_forgotten_grant_and_completes_the_next_night(
    control_plane_server: Callable[..., RunningControlPlane],
    database_url: str,
    fresh_server: Any,
    tmp_path: Path,
) -> None:
    release, keys = seed_fleet(database_url, ("remembered", "switched", "forgotten", "late"))

    # A server in production has handed out millions of transaction ids; a new one starts near
    # zero. A few thousand are enough to put this one ahead of the fresh server's restore.
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(20_000):
            conn.execute("SELECT pg_current_xact_id()")

    # Night one, mid-window: two grants on record, then the backup.
    before = control_plane_server(fake_clock=frozen_at("2026-11-30T02:01:00Z"))
    fleet = {name: FleetAgent(name, agent_key, before.base_url) for name, agent_key in keys.items()}
    for name in ("remembered", "switched"):
        assert fleet[name].claim(NIGHT_KEY).status_code == 201
    remembered_run = fleet["remembered"].claim(NIGHT_KEY).json()["run_id"]
    dump = tmp_path / "nachtwacht.dump"
    subprocess.run(
        [_postgres_tool("pg_dump"), "--format=custom", f"--file={dump}", database_url],
        check=True,
        capture_output=True,
    )

    # After the backup: a grant the restore will forget, and a switch it will not have heard of.
    forgotten = fleet["forgotten"].claim(NIGHT_KEY)
    assert forgotten.status_code == 201
    forgotten_run = forgotten.json()["run_id"]
    switched_run = fleet["switched"].claim(NIGHT_KEY).json()["run_id"]
    assert fleet["switched"].download(switched_run).status_code == 200
    assert fleet["switched"].confirm(switched_run).status_code == 200
    assert fleet["switched"].report(switched_run, "2026-11-30T02:01:30Z").status_code == 200
    assert before.stop() == 0

    # The restore, on a new server.
    admin = str(fresh_server.get_uri())
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("CREATE DATABASE nachtwacht")
    restored_url = psycopg.conninfo.make_conninfo(admin, dbname="nachtwacht")
    subprocess.run(
        [
            _postgres_tool("pg_restore"),
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            f"--dbname={restored_url}",
            str(dump),
        ],
        check=True,
        capture_output=True,
    )
    with psycopg.connect(restored_url) as conn:
        ahead = conn.execute(_FEED_AHEAD).fetchone()
    # The old server's transaction ids are ahead of the new server's: this new server will hand
    # them out again, and a replica would take its new changes for ones it had already applied.
    assert ahead is not None and ahead[0] > 0

    # A replica started before `after-restore` does not start on the copy: its data names the
    # old server's cluster, not this one, and nothing in the server's settings says so.
    with pytest.raises(AssertionError, match=r"FENCED: .* holds data written on another cluster"):
        control_plane_server(
            database_url=restored_url, fake_clock=frozen_at("2026-11-30T02:04:00Z")
        )
    done = _control(
        "after-restore", database_url=restored_url, clock=frozen_at("2026-11-30T02:05:00Z")
    )
    # Both grants on record at the backup were still outstanding there.
    assert done["tokens_revoked"] == 2
    with psycopg.connect(restored_url) as conn:
        assert conn.execute(_FEED_AHEAD).fetchone() == (0,)

    # Still night one, on the restored database: no agent gets a permit to switch.
    after = control_plane_server(
        database_url=restored_url, fake_clock=frozen_at("2026-11-30T02:06:00Z")
    )
    for agent in fleet.values():
        agent.base_url = after.base_url
    unknown = fleet["forgotten"].confirm(forgotten_run)
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["detail"]["code"] == "run_not_found"
    assert fleet["forgotten"].download(forgotten_run).status_code == 404
    revoked = fleet["remembered"].confirm(remembered_run)
    assert revoked.status_code == 403, revoked.text
    assert revoked.json()["detail"]["code"] == "token_revoked"
    assert "restore" in revoked.json()["detail"]["message"]
    # The slot is spent on record for those the database remembers; the forgotten one may not
    # claim it again either: it already holds the slot as far as it knows, and a second grant
    # would count against tonight's caps twice.
    assert after.stop() == 0

    # The next night: everyone polls, claims, downloads, gets the permit and reports.
    next_night = control_plane_server(
        database_url=restored_url, fake_clock=frozen_at("2026-12-01T02:01:00Z")
    )
    for agent in fleet.values():
        agent.base_url = next_night.base_url
        assert agent.poll().status_code == 200
    runs = {
        name: fleet[name].update(NEXT_NIGHT_KEY, release, "2026-12-01T02:01:30Z")
        for name in ("remembered", "forgotten", "late")
    }
    # The one that switched after the backup is on the release already: nothing to do.
    assert fleet["switched"].up_to_date(NEXT_NIGHT_KEY).status_code in {200, 201}
    assert "Traceback" not in next_night.stderr(), next_night.stderr()
    with psycopg.connect(restored_url) as conn:
        statuses = conn.execute(
            "SELECT id::text, status FROM runs WHERE slot_key = %s", [NEXT_NIGHT_KEY]
        ).fetchall()
        trail = conn.execute(
            "SELECT data->>'revoked_tokens' FROM events WHERE kind = 'platform.restored'"
        ).fetchall()
    assert sorted(status for _, status in statuses) == ["succeeded"] * 3 + ["up_to_date"]
    assert {run_id for run_id, status in statuses if status == "succeeded"} == set(runs.values())
    assert trail == [("2",)]
