"""A rollback end to end: 1.2.0 runs on some hosts, an operator rolls the pair back to 1.1.0, and
the hosts on 1.2.0 go back at their next slot through the organisation's cap — real daemons, a
real control plane on the embedded PostgreSQL, real builds signed with the real release tooling,
real install roots, on one fast fake clock.

The control plane holds no release key: until 1.1.0 is signed again as a downgrade the rollback
is refused, and no host moves. And a control plane that offers an older build anyway (its
database written behind the publish checks) cannot take a host down: the agent installs an older
build only when its signed manifest allows a downgrade.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from signed_release.keys import key_id
from tests.agent_daemon.daemon_support.night import Night, NightClock, local

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    # Held at 02:57 while the builds and the pre-installed hosts are set up; one grant a minute.
    scenario = Night(
        root=tmp_path / "night",
        clock=NightClock.held(local("2026-11-30T02:57"), begins=tmp_path / "clock", speed=60.0),
        start_control_plane=control_plane_server,
        control_plane_args=("--org-cap", "1"),
    )
    try:
        # A wide window, so three hosts one minute apart finish inside it on a busy machine.
        answer = scenario.operator.put("/v1/admin/settings", json={"catch_up_minutes": 60})
        assert answer.status_code == 200, answer.text
        yield scenario
    finally:
        scenario.close()


def _roll_back(scenario: Night) -> httpx.Response:
    return scenario.operator.post(
        "/v1/admin/releases/rollback",
        json={
            "channel": "stable",
            "platform": "linux-x86_64",
            "to": "1.1.0",
            "reason": "1.2.0 loses its cache on restart",
        },
    )


def test_hosts_on_the_bad_build_go_back_through_the_cap_at_their_next_slot(night: Night) -> None:
    night.publish("1.1.0", 41)
    night.publish("1.2.0", 42, stage="everyone")
    on_bad = [night.add_host(f"web-0{n}", installed=("1.2.0", 42)) for n in (1, 2, 3)]
    stayed = night.add_host("db-01", installed=("1.1.0", 41))

    refused = _roll_back(night)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "rollback_not_signed"

    night.publish("1.1.0", 43, allow_downgrade=True)
    rolled = _roll_back(night)
    assert rolled.status_code == 200, rolled.text
    assert (rolled.json()["from_version"], rolled.json()["to_manifest_version"]) == ("1.2.0", 43)

    daemons = [host.start() for host in on_bad]
    stayed_daemon = stayed.start()
    for host, daemon in zip(on_bad, daemons, strict=True):
        granted = daemon.wait_for("claim.granted", slot_key=SLOT)
        assert granted["version"] == "1.1.0"
        done = daemon.wait_for("update.succeeded", run_id=granted["run_id"])
        assert done["version"] == "1.1.0"
        daemon.wait_for("report.delivered", run_id=done["run_id"])
        assert host.current_version() == host.running_version() == "1.1.0"
        (run,) = night.runs(host)
        assert (run["status"], run["from_version"], run["version"]) == (
            "succeeded",
            "1.2.0",
            "1.1.0",
        )
    # The organisation's cap of one grant per round held: each host in its own round.
    claimed = [run["claimed_at"][:16] for host in on_bad for run in night.runs(host)]
    assert len(set(claimed)) == len(on_bad)

    # Never on the bad build: nothing to do, and its install is untouched.
    stayed_daemon.wait_for("slot.up_to_date", slot_key=SLOT)
    assert stayed_daemon.named("claim.granted") == []
    assert stayed.current_version() == stayed.running_version() == "1.1.0"


def test_an_older_build_offered_without_a_signed_permission_is_refused_by_the_agent(
    night: Night,
) -> None:
    night.publish("1.1.0", 41)
    night.publish("1.2.0", 42, stage="everyone")
    host = night.add_host("web-01", installed=("1.2.0", 42))
    # Signed after 1.2.0 by the release key, but not as a downgrade; stored and made current
    # behind the publish checks, as a control plane that is not to be trusted would.
    older = night.factory.release("1.1.0", 43)
    public = night.factory.key.public_key()
    with psycopg.connect(night.plane.database_url) as conn:
        row = conn.execute(
            "INSERT INTO releases (manifest_version, agent_version, channel, platform, issued_at,"
            " expires, length, sha256, key_id, manifest, signature, published_at, stage,"
            " stage_changed_at) VALUES (43, '1.1.0', 'stable', 'linux-x86_64', %s, %s, %s, %s,"
            " %s, %s, %s, now(), 'everyone', now()) RETURNING id",
            [
                older.manifest.issued_at,
                older.manifest.expires,
                older.manifest.length,
                older.manifest.sha256,
                key_id(public),
                older.manifest_bytes,
                older.signature,
            ],
        ).fetchone()
        assert row is not None
        conn.execute(
            "INSERT INTO release_artifacts (release_id, content) VALUES (%s, %s)",
            [row[0], older.artifact],
        )
        conn.execute(
            "UPDATE current_releases SET release_id = %s"
            " WHERE channel = 'stable' AND platform = 'linux-x86_64'",
            [row[0]],
        )

    daemon = host.start()
    granted = daemon.wait_for("claim.granted", slot_key=SLOT)
    assert granted["version"] == "1.1.0"
    failed = daemon.wait_for("update.failed", run_id=granted["run_id"])
    assert "does not allow a downgrade" in str(failed), failed
    assert daemon.named("swap.permitted") == []
    assert host.current_version() == host.running_version() == "1.2.0"
    assert not (host.agent.install_root / "versions" / "1.1.0").exists()
