"""The updater updates itself, end to end: a real control plane over loopback offers an updater
release, the daemon running from its own build (`<own root>/versions/1.0.0/venv`, under `Unit`,
the stand-in for systemd) claims it at its slot, downloads and verifies the signed bundle, installs
it beside itself with `pip install --no-index`, switches, and asks `systemctl` (a stand-in that
restarts `Unit`'s main process) to restart it. Then:

* a build that checks in commits and reports the run `succeeded`, and the managed agent's update
  at the next slot runs under it;
* a build that exits at start, one that never polls, one that crash-loops: the guard goes back to
  1.0.0, which reports the run `rolled_back` with the guard's word, the managed agent untouched;
* the daemon SIGKILLed at each step: the host ends on one working updater build, reported.

The 1.0.0 build is made once per module and copied into each test's own root; the bundles are
tar.gz files as `bin/package` lays them out (a folder with `install.sh` and `wheels/`), each with a
small wheel (`own_build_kit.make_wheel`) whose good kind runs this checkout's daemon.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_daemon.self_update.own_floor import OWN_FLOOR_FILE_NAME
from agent_daemon.self_update.pending_switch import pending_switch, read_switch_outcome
from agent_daemon.self_update.switch_files import SwitchFiles
from agent_daemon.updater.layout import InstallLayout
from signed_release.keys import load_private_key
from tests.agent_daemon.self_update.own_build_kit import (
    GUARD,
    KILL_STEPS,
    Unit,
    bundle_bytes,
    install,
    make_wheel,
)
from tests.worlds.hosts import AgentHost
from tests.worlds.releases import Release, ReleaseFactory

pytestmark = pytest.mark.slow

OLD, NEW, MANAGED = "1.0.0", "1.1.0", "1.5.0"
SPEED = 30
# 02:55 in Amsterdam: the 03:00 slot comes ten real seconds after the world is made.
FAKE_START = "2026-11-30T01:55:00Z"
ISSUED_AT = datetime(2026, 11, 28, tzinfo=UTC)
WAIT_SECONDS = 180.0


@dataclass
class Kit:
    """Made once per module: the release key, the 1.0.0 build, the good 1.1.0 bundle."""

    root: Path
    keys_dir: Path
    factory: ReleaseFactory
    old_build: Path
    good_bundle: bytes
    marker: Path

    def bundle(self, kind: str, *, wrong_config: Path) -> bytes:
        if kind == "killable":
            return self.good_bundle
        wheels = wrong_config.parent / f"wheels-{kind}"
        wheel = make_wheel(wheels, NEW, kind, wrong_config=wrong_config)
        return bundle_bytes(wheel, NEW)


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Kit:
    root = tmp_path_factory.mktemp("self-update-kit")
    keys_host = AgentHost(root / "keys-host")  # makes a release key pair in keys-host/keys
    assert keys_host.keys_dir is not None
    factory = ReleaseFactory(
        workdir=root / "signing",
        key=load_private_key(keys_host.keys_dir / "release.key"),
        issued_at=ISSUED_AT,
    )
    marker = root / "kill-at"
    template = root / "own-template"
    old_build = install(template, root / "wheels", OLD, "killable", marker=marker)
    wheel = make_wheel(root / "wheels" / NEW, NEW, "killable", marker=marker)
    return Kit(
        root=root,
        keys_dir=keys_host.keys_dir,
        factory=factory,
        old_build=old_build,
        good_bundle=bundle_bytes(wheel, NEW),
        marker=marker,
    )


class World:
    """The control plane, one enrolled host whose updater runs from its own root under `Unit`."""

    def __init__(self, root: Path, kit: Kit, start_plane: Callable[..., Any]) -> None:
        self.kit = kit
        self.fake_clock = f"{FAKE_START},anchor={time.time():.1f},speed={SPEED}"
        self.plane = start_plane(
            fake_clock=self.fake_clock,
            env={"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(kit.keys_dir / "release.pub")},
        )
        org = self.plane.create_org("Acme")
        agent = self.plane.enroll_agent(org["org_id"], "web-01")
        self.agent_id = agent["agent_id"]
        self.panel = httpx.Client(
            base_url=self.plane.base_url,
            headers={"Authorization": f"Bearer {org['panel_key']}"},
            timeout=60,
        )
        self.operator = httpx.Client(
            base_url=self.plane.base_url,
            headers={"Authorization": f"Bearer {self.plane.create_operator_key()}"},
            timeout=60,
        )
        # The longest catch-up: a new build's venv is made inside the claim's window, and on a
        # shared machine that takes many product minutes.
        answer = self.operator.put("/v1/admin/settings", json={"catch_up_minutes": 120})
        assert answer.status_code == 200, answer.text
        self.host = AgentHost(root / "host", keys_dir=kit.keys_dir)
        self.host.prepare()
        managed_current = self.host.install_root / "current"
        enrolled = self.host.enroll(
            self.plane.base_url,
            agent["agent_key"],
            "--request-timeout-seconds", "300",
            "--health-command", f"sh -c 'basename \"$(readlink {managed_current})\"'",
            "--platform", "linux-x86_64",
            "--channel", "stable",
            env={"NACHTWACHT_FAKE_CLOCK": self.fake_clock},
        )  # fmt: skip
        assert enrolled.returncode == 0, enrolled.stderr
        self.state_dir = self.host.state_dir
        self.files = SwitchFiles.under(self.state_dir)
        self.wrong_config = root / "wrong.toml"
        config = (self.state_dir / "agent.toml").read_text()
        # A port on loopback nobody listens on: a build given this config never polls.
        self.wrong_config.write_text(config.replace(self.plane.base_url, "http://127.0.0.1:9"))
        self.wrong_config.chmod(0o600)
        self.own_root = root / "opt-nachtwacht"
        shutil.copytree(kit.old_build.parent.parent, self.own_root, symlinks=True)
        self.layout = InstallLayout(self.own_root)
        self.layout.point("current", OLD)
        fake_bin = root / "fake-bin"
        fake_bin.mkdir()
        self.unit = Unit.for_host(
            self.own_root,
            self.state_dir,
            root / "unit",
            NACHTWACHT_FAKE_CLOCK=self.fake_clock,
            PATH=f"{fake_bin}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        )
        # systemd's stand-in: `systemctl restart --no-block nachtwacht-agent.service` stops the
        # unit's main process; `Unit` starts it again after the guard's pre-start.
        systemctl = fake_bin / "systemctl"
        systemctl.write_text(f"#!/bin/sh\n{self.unit.restart_command()}\n")
        systemctl.chmod(0o755)

    def set_schedule(self, times: list[str]) -> None:
        answer = self.panel.put(
            f"/v1/agents/{self.agent_id}/schedule", json={"enabled": True, "times": times}
        )
        assert answer.status_code == 200, answer.text

    def publish(self, release: Release) -> None:
        answer = self.operator.post(
            "/v1/admin/releases",
            json={
                "manifest_b64": base64.b64encode(release.manifest_bytes).decode(),
                "signature_b64": base64.b64encode(release.signature).decode(),
                "artifact_b64": base64.b64encode(release.artifact).decode(),
            },
        )
        assert answer.status_code == 201, answer.text

    def publish_updater(self, kind: str) -> None:
        bundle = self.kit.bundle(kind, wrong_config=self.wrong_config)
        self.publish(
            self.kit.factory.sign(bundle, version=NEW, manifest_version=20, product="updater")
        )

    def publish_managed(self) -> None:
        self.publish(self.kit.factory.release(MANAGED, 10))

    def runs(self) -> list[dict[str, Any]]:
        answer = self.panel.get(f"/v1/agents/{self.agent_id}/runs")
        assert answer.status_code == 200, answer.text
        body = answer.json()
        runs: list[dict[str, Any]] = body["runs"] if isinstance(body, dict) else body
        return runs

    def run_of(self, version: str) -> dict[str, Any] | None:
        found = [r for r in self.runs() if r.get("release_version") == version]
        return found[0] if found else None

    def wait_for_run(self, version: str, status: str) -> dict[str, Any]:
        def ended() -> bool:
            run = self.run_of(version)
            return run is not None and run["status"] == status

        self.unit.wait_until(f"the run of {version} is {status}", ended, seconds=WAIT_SECONDS)
        run = self.run_of(version)
        assert run is not None
        return run

    def assert_one_working_build(self, version: str) -> None:
        assert self.layout.link_target("current") == version
        assert pending_switch(self.state_dir) is None
        for leftover in (self.files.rolling, self.files.committing):
            assert not leftover.exists(), leftover

        def polls() -> bool:
            last = self.unit.last()
            return last.build == version and "config.synced" in last.event_names()

        self.unit.wait_until(f"{version} runs and polls", polls, seconds=WAIT_SECONDS)

    def close(self) -> None:
        self.unit.stop()
        self.panel.close()
        self.operator.close()


@pytest.fixture
def world(kit: Kit, control_plane_server: Callable[..., Any], tmp_path: Path) -> Iterator[World]:
    kit.marker.unlink(missing_ok=True)
    made = World(tmp_path, kit, control_plane_server)
    yield made
    made.close()
    kit.marker.unlink(missing_ok=True)


def test_the_updater_updates_itself_and_the_managed_agent_updates_under_the_new_one(
    world: World,
) -> None:
    world.set_schedule(["03:00", "03:15"])
    world.publish_updater("killable")
    world.publish_managed()
    world.unit.start()

    run = world.wait_for_run(NEW, "succeeded")
    assert (run["from_version"], run["version"], run["reason"]) == (OLD, NEW, None)
    assert run["switched_at"] is not None
    world.assert_one_working_build(NEW)
    assert world.layout.link_target("previous") == OLD
    # The updater line's floor is the committed release's manifest, on disk for every restart.
    floors = (world.state_dir / "updater" / OWN_FLOOR_FILE_NAME).read_text()
    assert '"floors"' in floors and ": 20" in floors, floors
    # Reported and cleared: nothing is left for a later start to report again.
    assert read_switch_outcome(world.state_dir) is None
    assert not world.files.run.exists()
    # The daemon that switched stopped once, by the restart it asked for.
    assert [s.build for s in world.unit.starts[:2]] == [OLD, NEW]

    managed = world.wait_for_run(MANAGED, "succeeded")
    assert managed["version"] == MANAGED
    assert world.host.current_version() == MANAGED
    updated_in = [s.build for s in world.unit.starts if "update.succeeded" in s.event_names()]
    assert updated_in == [NEW]
    page = world.panel.get(f"/v1/agents/{world.agent_id}").json()
    assert NEW in str(page), page

    status = subprocess.run(
        [str(world.own_root / "current/venv/bin/python"), "-m", "nachtwacht", "agent", "status",
         "--state-dir", str(world.state_dir)],
        env=world.unit.env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    assert f"self-update: on, nachtwacht's own agent {NEW}" in status.stdout


@pytest.mark.parametrize(
    ("kind", "guard_word"),
    [
        ("exits_at_start", "exited_at_start"),
        ("crash_loop", "crash_loop"),
        ("never_polls", "never_checked_in"),
    ],
)
def test_a_new_build_that_does_not_check_in_is_rolled_back_and_the_old_one_reports_it(
    world: World, kind: str, guard_word: str
) -> None:
    world.set_schedule(["03:00"])
    world.publish_updater(kind)
    world.publish_managed()
    world.unit.start()

    world.unit.wait_until(
        "the switch to the new build",
        lambda: any(s.build == NEW for s in world.unit.starts),
        seconds=WAIT_SECONDS,
    )
    if kind == "never_polls":
        # The guard's timer, past the deadline: `date` ten minutes ahead of this host's clock.
        late = world.wrong_config.parent / "late-bin"
        late.mkdir()
        (late / "date").write_text("#!/bin/sh\necho $(( $(/bin/date +%s) + 700 ))\n")
        (late / "date").chmod(0o755)
        env = {**world.unit.env, "PATH": f"{late}{os.pathsep}{world.unit.env['PATH']}"}
        world.unit.wait_until(
            "the new build started", lambda: world.files.started.exists(), seconds=WAIT_SECONDS
        )
        checked = subprocess.run(
            ["sh", str(GUARD), "check", "--state-dir", str(world.state_dir),
             "--restart", world.unit.restart_command()],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stderr

    run = world.wait_for_run(NEW, "rolled_back")
    assert (run["from_version"], run["version"], run["reason"]) == (
        OLD,
        OLD,
        "health_check_failed",
    )
    assert f"({guard_word})" in run["error"], run["error"]
    world.assert_one_working_build(OLD)
    reporter = [s for s in world.unit.starts if "self_update.reported" in s.event_names()]
    assert [s.build for s in reporter] == [OLD]
    assert read_switch_outcome(world.state_dir) is None
    # The managed agent was never touched: its slot went to the updater.
    assert world.host.current_version() is None
    assert world.run_of(MANAGED) is None


@pytest.mark.parametrize("step", KILL_STEPS)
def test_a_self_update_killed_at_any_step_ends_on_one_working_build_and_is_reported(
    world: World, step: str
) -> None:
    world.kit.marker.write_text(step)
    world.set_schedule(["03:00"])
    world.publish_updater("killable")
    world.unit.start()

    run = world.wait_for_run(NEW, "succeeded")
    assert not world.kit.marker.exists(), f"the daemon was never killed at {step}"
    assert -9 in [s.process.returncode for s in world.unit.starts]
    assert (run["from_version"], run["version"]) == (OLD, NEW)
    world.assert_one_working_build(NEW)
    assert read_switch_outcome(world.state_dir) is None
    # One install of the new build, never a second claim of the release.
    assert [r["release_version"] for r in world.runs() if r["status"] != "missed"] == [NEW]
