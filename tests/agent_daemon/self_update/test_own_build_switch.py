"""The updater switches to a build of itself, and counts it only once that build has checked in:
a build that exits at start, one that starts but never polls, one that crash-loops — each is taken
back by the guard script, with the right reason, and the build before it runs again.

Real processes and files throughout: the builds are venvs made by `pip install --no-index` from
wheels (own_build_kit), the daemons poll a real control plane, the guard is the shipped shell
script; only systemd is played by `Unit`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_daemon.self_update.pending_switch import pending_switch, read_switch_outcome, switch
from agent_daemon.self_update.switch_files import SwitchFiles
from agent_daemon.updater.layout import InstallLayout
from tests.agent_daemon.self_update.own_build_kit import NEW, OLD, Unit, install, run_guard
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


class OwnHost:
    """An enrolled host whose updater runs from `own_root/current`, under `Unit`."""

    def __init__(self, root: Path, plane: Any, fake_clock: str) -> None:
        org = plane.create_org("Acme")
        agent = plane.enroll_agent(org["org_id"], "web-01")
        self.host = AgentHost(root / "host")
        enrolled = self.host.enroll(
            plane.base_url, agent["agent_key"], "--request-timeout-seconds", "300"
        )
        assert enrolled.returncode == 0, enrolled.stderr
        self.own_root = root / "opt-nachtwacht"
        self.wheels = root / "wheels"
        self.state_dir = self.host.state_dir
        self.files = SwitchFiles.under(self.state_dir)
        config = (self.state_dir / "agent.toml").read_text()
        self.wrong_config = root / "wrong.toml"
        # A port on loopback nobody listens on: the build starts but can never poll.
        self.wrong_config.write_text(config.replace(plane.base_url, "http://127.0.0.1:9"))
        self.wrong_config.chmod(0o600)
        install(self.own_root, self.wheels, OLD, "good")
        layout = InstallLayout(self.own_root)
        layout.point("current", OLD)
        self.layout = layout
        self.unit = Unit.for_host(
            self.own_root, self.state_dir, root / "unit", NACHTWACHT_FAKE_CLOCK=fake_clock
        )

    def install(self, version: str, kind: str) -> None:
        install(self.own_root, self.wheels, version, kind, wrong_config=self.wrong_config)

    def switch(self, version: str, *, deadline: timedelta = timedelta(minutes=10)) -> None:
        switch(
            own_root=self.own_root,
            state_dir=self.state_dir,
            to_version=version,
            now=datetime.now(UTC),
            restart=self.unit.restart,
            deadline=deadline,
        )

    def rolled_back(self) -> bool:
        """The guard's rollback is done: it writes `rolled_back`, then removes `pending.rolling`."""
        return self.files.rolled_back.exists() and not self.files.rolling.exists()

    def polled(self, build: str) -> Callable[[], bool]:
        def check() -> bool:
            return any(
                s.build == build and "config.synced" in s.event_names() for s in self.unit.starts
            )

        return check

    def assert_one_working_build(self, version: str) -> None:
        """`current` names `version`, complete, nothing pending, and it polls."""
        assert self.layout.link_target("current") == version
        assert pending_switch(self.state_dir) is None
        for leftover in (self.files.rolling, self.files.committing):
            assert not leftover.exists(), leftover
        self.unit.wait_until(f"{version} polls", self.polled(version))


@pytest.fixture
def own_host(control_plane_server: Callable[..., Any], tmp_path: Path) -> Iterator[OwnHost]:
    fake_clock = f"2026-11-30T01:00:00Z,anchor={time.time()},speed=60"
    plane = control_plane_server(fake_clock=fake_clock)
    made = OwnHost(tmp_path, plane, fake_clock)
    yield made
    made.unit.stop()


def test_a_build_that_polls_is_committed(own_host: OwnHost) -> None:
    own_host.unit.start()
    own_host.unit.wait_until("the old build polls", own_host.polled(OLD))
    own_host.install(NEW, "good")
    own_host.switch(NEW)

    own_host.unit.wait_until("the switch is committed", lambda: own_host.files.committed.exists())
    own_host.assert_one_working_build(NEW)
    assert own_host.layout.link_target("previous") == OLD
    outcome = read_switch_outcome(own_host.state_dir)
    assert outcome is not None and outcome.outcome == "committed"
    assert outcome.running_version == NEW
    # The guard's timer, later, finds nothing to take back.
    assert run_guard("check", own_host.state_dir, "--restart", "false").returncode == 0
    assert own_host.layout.link_target("current") == NEW


def test_a_build_that_exits_at_start_is_taken_back(own_host: OwnHost) -> None:
    own_host.unit.start()
    own_host.unit.wait_until("the old build polls", own_host.polled(OLD))
    own_host.install(NEW, "exits_at_start")
    own_host.switch(NEW)

    own_host.unit.wait_until("the guard takes it back", own_host.rolled_back)
    outcome = read_switch_outcome(own_host.state_dir)
    assert outcome is not None and outcome.outcome == "rolled_back"
    assert (outcome.reason, outcome.failed_version, outcome.running_version) == (
        "exited_at_start",
        NEW,
        OLD,
    )
    own_host.assert_one_working_build(OLD)
    new_starts = [s for s in own_host.unit.starts if s.build == NEW]
    # Three starts allowed, the fourth never happens: the guard points `current` back first.
    assert len(new_starts) == 3
    assert all(s.process.returncode == 3 for s in new_starts)
    own_host.unit.wait_until(
        "the old build says it was rolled back to",
        lambda: "self_update.rolled_back" in own_host.unit.last().event_names(),
    )


def test_a_build_that_never_polls_is_taken_back_by_the_timer(own_host: OwnHost) -> None:
    own_host.unit.start()
    own_host.unit.wait_until("the old build polls", own_host.polled(OLD))
    own_host.install(NEW, "never_polls")
    own_host.switch(NEW, deadline=timedelta(seconds=15))
    own_host.unit.wait_until(
        "the new build started", lambda: own_host.files.started.exists(), seconds=60
    )

    # The timer, every minute on a host; every second here.
    checks = 0
    while not own_host.files.rolled_back.exists():
        checked = run_guard(
            "check", own_host.state_dir, "--restart", own_host.unit.restart_command()
        )
        assert checked.returncode == 0, checked.stderr
        checks += 1
        assert checks < 120, "the guard's timer never took the switch back"
        time.sleep(1)
    outcome = read_switch_outcome(own_host.state_dir)
    assert outcome is not None
    assert (outcome.reason, outcome.failed_version) == ("never_checked_in", NEW)
    own_host.assert_one_working_build(OLD)
    # The build that never polled ran until the guard restarted the unit.
    new_starts = [s for s in own_host.unit.starts if s.build == NEW]
    assert len(new_starts) == 1
    assert "config.synced" not in new_starts[0].event_names()


def test_a_build_that_crash_loops_is_taken_back(own_host: OwnHost) -> None:
    own_host.unit.start()
    own_host.unit.wait_until("the old build polls", own_host.polled(OLD))
    own_host.install(NEW, "crash_loop")
    own_host.switch(NEW)

    own_host.unit.wait_until("the guard takes it back", own_host.rolled_back)
    outcome = read_switch_outcome(own_host.state_dir)
    assert outcome is not None
    assert (outcome.reason, outcome.failed_version) == ("crash_loop", NEW)
    own_host.assert_one_working_build(OLD)
    new_starts = [s for s in own_host.unit.starts if s.build == NEW]
    assert [s.process.returncode for s in new_starts] == [70, 70, 70]


def test_a_new_build_killed_as_soon_as_it_started_starts_again_and_commits(
    own_host: OwnHost,
) -> None:
    own_host.unit.start()
    own_host.unit.wait_until("the old build polls", own_host.polled(OLD))
    own_host.install(NEW, "good")
    own_host.switch(NEW)
    # Its first poll may come before this test sees `started` (the commit removes it): then the
    # kill comes after the commit, which must hold as well.
    files = own_host.files
    own_host.unit.wait_until(
        "the new build started", lambda: files.started.exists() or files.committed.exists()
    )
    first_new = own_host.unit.last()
    first_new.process.kill()  # kill -9: no chance to finish anything

    own_host.unit.wait_until("the switch is committed", lambda: own_host.files.committed.exists())
    own_host.assert_one_working_build(NEW)
    assert first_new.process.wait(timeout=30) == -9
    assert read_switch_outcome(own_host.state_dir) is not None
