"""One update on a real host: real loopback server, real files and symlinks, the agent as a real
program under a supervisor. Every refusal asserts that the old version keeps running."""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.updater.update_locking import update_lock
from agent_daemon.updater.updater import Updater
from ground.clock import FakeClock, SystemClock
from tests.agent_daemon.updater_support.host import Host, customer_host, host_running
from tests.agent_daemon.updater_support.releases import evil_archive


def assert_still_running_old(host: Host, outcome_version: str | None, old: str = "1.4.1") -> None:
    assert outcome_version == old
    assert host.current() == f"versions/{old}"
    assert host.running_version() == old


def test_a_verified_update_switches_restarts_and_reports_the_new_version(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        outcome = host.apply(host.factory.release("1.5.0", 42), "run-1")
        assert (outcome.status, outcome.version, outcome.error) == ("succeeded", "1.5.0", None)
        assert host.current() == "versions/1.5.0"
        assert host.previous() == "versions/1.4.1"
        assert host.running_version() == "1.5.0"
        marker = host.install_root / "versions/1.5.0/.complete"
        assert marker.read_text().strip() == host.factory.release("1.5.0", 42).manifest.sha256
        assert host.state()["floor"] == 42
        assert host.state()["in_progress"] is None


def test_a_tampered_artifact_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        tampered = bytearray(release.artifact)
        tampered[len(tampered) // 2] ^= 0xFF
        request = host.request(release, "run-1")
        host.server.serve("/v1/agent/runs/run-1/artifact", bytes(tampered))
        outcome = host.updater().apply(request)
        assert outcome.status == "failed"
        assert "expected the signed" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert not (host.install_root / "versions/1.5.0").exists()


def test_a_valid_manifest_with_another_releases_artifact_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        wanted = host.factory.release("1.5.0", 42)
        other = host.factory.release("1.6.0", 43)
        request = host.request(wanted, "run-1")
        host.server.serve("/v1/agent/runs/run-1/artifact", other.artifact)
        outcome = host.updater().apply(request)
        assert outcome.status == "failed"
        assert "another release's artifact" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_a_signature_by_an_unpinned_key_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        rogue = Ed25519PrivateKey.generate()
        release = host.factory.release("1.5.0", 42, key=rogue)
        outcome = host.apply(release, "run-1")
        assert outcome.status == "failed"
        assert "is not a trusted release key" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert host.server.requests("/v1/agent/runs/run-1/artifact") == []


def test_manifest_41_after_42_is_a_rollback_and_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        assert host.apply(host.factory.release("1.5.0", 42), "run-1").status == "succeeded"
        outcome = host.apply(host.factory.release("1.6.0", 41), "run-2")
        assert outcome.status == "failed"
        assert "manifest_version 41 is not above 42" in (outcome.error or "")
        assert_still_running_old(host, outcome.version, old="1.5.0")


def test_an_expired_manifest_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42, expires_in=timedelta(minutes=30))
        outcome = host.apply(release, "run-1")
        assert outcome.status == "failed"
        assert "expired" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_a_release_for_another_platform_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        outcome = host.apply(host.factory.release("1.5.0", 42, platform="linux-aarch64"), "run-1")
        assert outcome.status == "failed"
        assert "'linux-aarch64' is not this host's 'linux-x86_64'" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_an_archive_with_dotdot_is_refused_and_writes_nothing_outside(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        artifact = evil_archive("../x")
        # Signed without `release sign`'s lint (an old or careless signer): the agent must still
        # refuse it on its own.
        release = host.factory.sign(
            artifact, version="1.5.0", manifest_version=42, unpacked_size=10_000
        )
        outcome = host.apply(release, "run-1")
        assert outcome.status == "failed"
        assert "'../x'" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert not (host.install_root / "versions/x").exists()
        assert not (host.install_root / "x").exists()
        assert sorted(os.listdir(host.install_root / "versions")) == ["1.4.1"]


def test_a_build_that_fails_its_self_test_is_never_switched_to(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42, "wrong-version")
        outcome = host.apply(release, "run-1")
        assert outcome.status == "failed"
        assert "self-test of 1.5.0 failed" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert "1.5.0" in host.state()["bad_versions"]


def test_a_build_that_never_becomes_healthy_is_rolled_back_within_the_deadline(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42, "never-healthy")
        outcome = host.updater(health_deadline_seconds=3.0).apply(host.request(release, "run-1"))
        assert outcome.status == "rolled_back"
        assert "not healthy within 3 s" in (outcome.error or "")
        assert "rolled back to 1.4.1" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert host.previous() is None
        # Marked bad: the same version is not tried again.
        again = host.apply(host.factory.release("1.5.0", 43, "never-healthy"), "run-2")
        assert again.status == "failed"
        assert "failed on this host before" in (again.error or "")


@pytest.mark.parametrize(
    ("serving", "expected"),
    [
        pytest.param({"behaviour": "overlong_streamed"}, "sent more than the signed length",
                     id="streams_past_length"),
        pytest.param({"behaviour": "overlong_announced"}, "the server announces",
                     id="announces_past_length"),
        pytest.param({"behaviour": "trickle", "trickle_interval": 0.05}, "ran past its deadline",
                     id="trickle"),
    ],
)  # fmt: skip
def test_a_misbehaving_server_is_cut_off_and_the_old_version_keeps_running(
    tmp_path: Path, serving: dict[str, object], expected: str
) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        # Only the trickle needs a short deadline; the others must fail for their own reason.
        deadline = 0.5 if serving["behaviour"] == "trickle" else 900.0
        updater = host.updater(download_deadline_seconds=deadline)
        outcome = updater.apply(host.request(release, "run-1", **serving))
        assert outcome.status == "failed"
        assert expected in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert host.state()["in_progress"] is None


def test_not_enough_disk_is_refused_before_downloading(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        outcome = host.updater(disk_reserve_bytes=10**18).apply(host.request(release, "run-1"))
        assert outcome.status == "failed"
        assert "not enough disk space" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        assert host.server.requests("/v1/agent/runs/run-1/artifact") == []


def test_an_interrupted_download_resumes_with_range_on_the_next_attempt(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        request = host.request(release, "run-1", behaviour="cut_once", cut_after=500)
        first = host.updater().apply(request)
        assert first.status == "failed"
        assert "kept to resume" in (first.error or "")
        assert_still_running_old(host, first.version)
        second = host.updater().apply(request)
        assert (second.status, second.version) == ("succeeded", "1.5.0")
        resumed = host.server.requests("/v1/agent/runs/run-1/artifact")[-1]
        assert resumed["range"] == "bytes=500-"
        assert host.running_version() == "1.5.0"


def test_a_server_that_ignores_range_is_downloaded_again_from_the_start(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        request = host.request(release, "run-1", behaviour="cut_once", cut_after=500)
        assert host.updater().apply(request).status == "failed"
        host.server.serve(
            "/v1/agent/runs/run-1/artifact", release.artifact, behaviour="ignore_range"
        )
        outcome = host.updater().apply(request)
        assert (outcome.status, outcome.version) == ("succeeded", "1.5.0")
        assert host.server.requests("/v1/agent/runs/run-1/artifact")[-1]["range"] == "bytes=500-"


def test_one_update_at_a_time(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        with update_lock(host.state_dir):
            # The lock is per open file description, so a second holder in this process conflicts
            # exactly as another process would.
            outcome = host.apply(release, "run-1")
        assert outcome.status == "failed"
        assert "another update is in progress" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_the_same_run_again_gets_the_same_outcome_not_a_second_update(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        first = host.updater().apply(request)
        again = host.updater().apply(request)
        assert again == first
        assert first.status == "succeeded"
        assert len(host.server.requests("/v1/agent/runs/run-1/artifact")) == 1


def test_retention_keeps_at_most_three_versions(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        for number, version in enumerate(["1.5.0", "1.6.0", "1.7.0"], start=42):
            outcome = host.apply(host.factory.release(version, number), f"run-{version}")
            assert outcome.status == "succeeded", outcome.error
        assert host.versions_on_disk() == ["1.5.0", "1.6.0", "1.7.0"]
        assert (host.current(), host.previous()) == ("versions/1.7.0", "versions/1.6.0")
        assert not list((host.state_dir / "staging").iterdir())


def test_a_first_install_on_an_empty_host(tmp_path: Path) -> None:
    with customer_host(tmp_path) as host:
        assert host.updater().installed_version() is None
        outcome = host.apply(host.factory.release("1.0.0", 1), "run-1")
        assert (outcome.status, outcome.version) == ("succeeded", "1.0.0")
        assert host.updater().installed_version() == "1.0.0"
        assert host.previous() is None


def test_a_release_of_the_running_version_is_a_no_op_that_moves_the_floor(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        outcome = host.apply(host.factory.release("1.4.1", 50), "run-1")
        assert (outcome.status, outcome.version) == ("succeeded", "1.4.1")
        assert host.server.requests("/v1/agent/runs/run-1/artifact") == []
        assert host.state()["floor"] == 50
        assert host.running_version() == "1.4.1"


def test_a_failing_restart_command_rolls_back(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        updater = host.updater(restart_command=("false",))
        outcome = updater.apply(host.request(host.factory.release("1.5.0", 42), "run-1"))
        assert outcome.status == "rolled_back"
        assert "restart command 'false' exited 1" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_another_unfinished_update_blocks_a_new_one(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        unfinished = host.request(host.factory.release("1.5.0", 42), "run-old")
        # The state an updater leaves when it dies right after accepting run-old.
        state_file = host.state_dir / "updater-state.json"
        document = json.loads(state_file.read_text())
        document["in_progress"] = {
            "run_id": "run-old", "step": "accepted", "version": "1.5.0",
            "manifest_b64": base64.b64encode(unfinished.manifest).decode(),
            "signature_b64": base64.b64encode(unfinished.signature).decode(),
            "artifact_url": unfinished.artifact_url, "from_version": "1.4.1",
            "previous_before": None,
        }  # fmt: skip
        state_file.write_text(json.dumps(document))
        outcome = host.apply(host.factory.release("1.6.0", 43), "run-new")
        assert outcome.status == "failed"
        assert "update run-old is unfinished; resume() it first" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)
        resumed = host.updater().resume()
        assert resumed is not None
        assert (resumed.run_id, resumed.status, resumed.version) == (
            "run-old",
            "succeeded",
            "1.5.0",
        )


def test_a_first_install_that_never_becomes_healthy_has_nothing_to_roll_back_to(
    tmp_path: Path,
) -> None:
    with customer_host(tmp_path, health_deadline_seconds=2.0) as host:
        outcome = host.apply(host.factory.release("1.0.0", 1, "never-healthy"), "run-1")
        assert outcome.status == "failed"
        assert "no earlier version to roll back to" in (outcome.error or "")
        assert "1.0.0" in host.state()["bad_versions"]


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("/v1/agent/runs/run-1/artifact", id="relative"),
        pytest.param("file:///etc/passwd", id="file_scheme"),
    ],
)
def test_an_artifact_url_that_is_not_absolute_http_is_refused(tmp_path: Path, url: str) -> None:
    with host_running(tmp_path) as host:
        request = replace(
            host.request(host.factory.release("1.5.0", 42), "run-1"), artifact_url=url
        )
        outcome = host.updater().apply(request)
        assert outcome.status == "failed"
        assert f"artifact_url: {url!r} is not an absolute http(s) URL" == outcome.error
        assert_still_running_old(host, outcome.version)


def test_a_build_removed_behind_the_updaters_back_is_never_switched_to(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:

        def tamper(step: str) -> None:
            if step == "installed":
                shutil.rmtree(host.install_root / "versions/1.5.0")

        updater = Updater(
            settings=host.settings, client=httpx.Client(), clock=SystemClock(), on_step=tamper
        )
        outcome = updater.apply(host.request(host.factory.release("1.5.0", 42), "run-1"))
        assert outcome.status == "failed"
        assert "vanished or changed after its install" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_a_clock_earlier_than_the_running_build_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        stuck_in_2020 = FakeClock(start=datetime(2020, 1, 1, tzinfo=UTC), anchor=time.time())
        updater = Updater(settings=host.settings, client=httpx.Client(), clock=stuck_in_2020)
        outcome = updater.apply(host.request(host.factory.release("1.5.0", 42), "run-1"))
        assert outcome.status == "failed"
        assert "the clock is wrong" in (outcome.error or "")
        assert_still_running_old(host, outcome.version)


def test_an_older_build_signed_without_allowing_a_downgrade_is_refused(tmp_path: Path) -> None:
    """A manifest newer than the floor is not enough: going back needs the signed permission."""
    with host_running(tmp_path) as host:
        assert host.apply(host.factory.release("1.5.0", 42), "run-1").status == "succeeded"
        outcome = host.apply(host.factory.release("1.4.1", 43), "run-2")
        assert outcome.status == "failed"
        assert "does not allow a downgrade" in (outcome.error or "")
        assert_still_running_old(host, outcome.version, old="1.5.0")
        assert host.state()["floor"] == 42


def test_an_older_build_signed_as_a_downgrade_is_installed_and_moves_the_floor(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        assert host.apply(host.factory.release("1.5.0", 42), "run-1").status == "succeeded"
        outcome = host.apply(host.factory.release("1.4.1", 43, allow_downgrade=True), "run-2")
        assert (outcome.status, outcome.version, outcome.error) == ("succeeded", "1.4.1", None)
        assert host.current() == "versions/1.4.1"
        assert host.running_version() == "1.4.1"
        assert host.state()["floor"] == 43
