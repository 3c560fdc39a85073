"""The host's clock jumping days forwards or backwards between two minutes (a VM restored from a
snapshot, a dead clock battery, an administrator's `date -s`): the agent plans on the control
plane's clock, which it learns from every answer, and a minute on a wrong clock may cost the
night nothing more than that minute. Real files, the in-memory control plane."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.wire import parse_config
from agent_daemon.disk.unreachable_file import UNREACHABLE_FILE_NAME, UnreachableSlotsFile
from agent_daemon.host.activity import Activity, ActivityFile
from agent_daemon.host.event_log import EventLog
from agent_daemon.host.status import AgentStatus, problems
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.agent_daemon.minute.slot_world import SLOT_AT, SLOT_KEY
from tests.agent_daemon.network_support.servers import config_document
from tests.worlds.clocks import ManualClock


class JumpingClock:
    """The host's clock: the control plane's (`base`) plus an error that a test changes."""

    is_fake = True
    speed = 1.0

    def __init__(self, base: ManualClock) -> None:
        self._base = base
        self.error = timedelta(0)

    def now(self) -> datetime:
        return self._base.now() + self.error

    def real_seconds(self, product_seconds: float) -> float:
        return product_seconds

    def sleep(self, product_seconds: float) -> None:
        self._base.sleep(product_seconds)

    def describe(self) -> str:
        return f"jumping test clock ({self.error})"


def _night(tmp_path: Path, jump_days: int, *, installed: str | None) -> Harness:
    """02:58 on the control plane's clock; at 03:00 the host's clock is `jump_days` off for one
    minute, then right again for 03:01 and 03:02."""
    server = ManualClock(SLOT_AT - timedelta(minutes=2))
    control_plane = FakeControlPlane(now=server.now)
    host = JumpingClock(server)
    updater = StubUpdater()
    updater.installed = installed
    h = Harness(tmp_path, control_plane, updater, host)
    assert h.daemon.tick() == "no_slot"
    server.set(SLOT_AT)
    host.error = timedelta(days=jump_days)
    assert h.daemon.tick() == ("host_clock" if abs(jump_days) > 1 else "dispatched")
    # Nothing was asked for and nothing recorded on the wrong clock.
    assert h.control_plane.claims() == []
    assert h.state().last_consumed is None
    assert h.outbox.pending() == []
    host.error = timedelta(0)
    for minute in (1, 2):
        server.set(SLOT_AT + timedelta(minutes=minute))
        h.daemon.tick()
    return h


@pytest.mark.parametrize("jump_days", [3, -3, 400, -400])
def test_a_minute_on_a_clock_days_off_costs_the_night_nothing(
    tmp_path: Path, jump_days: int
) -> None:
    h = _night(tmp_path, jump_days, installed="1.4.1")
    runs = list(h.control_plane.runs.values())
    assert [(run.slot_key, run.status) for run in runs] == [(SLOT_KEY, "succeeded")]
    assert h.updater.applied
    assert h.state().last_consumed is not None
    assert h.state().last_consumed.key == SLOT_KEY


@pytest.mark.parametrize("jump_days", [3, -3])
def test_nothing_to_do_is_not_reported_for_another_days_slot(
    tmp_path: Path, jump_days: int
) -> None:
    h = _night(tmp_path, jump_days, installed="1.5.0")
    runs = list(h.control_plane.runs.values())
    assert [(run.slot_key, run.status) for run in runs] == [(SLOT_KEY, "up_to_date")]
    assert h.updater.applied == []


def test_while_the_clock_is_off_the_daemon_says_it_claims_nothing_not_a_wrong_days_slot() -> None:
    """`STATUS=` and `agent status`'s "doing": not "waiting for 03:00 CET on" a day the clock made
    up, but why no slot is taken."""
    log = EventLog(now=lambda: SLOT_AT, stream=io.StringIO())
    activity = Activity(now=lambda: SLOT_AT, log=log, file=None, stuck_after=10, idle_after=100)
    activity.tick_started()
    activity.tick_finished("host_clock", parse_config(json.loads(config_document())))
    assert activity.record.doing == (
        "no scheduled slot is claimed: this host's clock is more than a day off the control "
        "plane's (set it right: NTP)"
    )


@pytest.mark.parametrize("jump_days", [3, -3])
def test_an_offline_minute_on_a_clock_days_off_notes_no_slot(
    tmp_path: Path, jump_days: int
) -> None:
    """The clock found off by the last answer, then the control plane out of reach: a slot
    planned on that clock is another day's, so none is noted as missed for want of the control
    plane (reported, it would be refused and set aside), as an online minute claims none."""
    server = ManualClock(SLOT_AT - timedelta(days=1, minutes=2))
    control_plane = FakeControlPlane(now=server.now, contract_version=7)
    host = JumpingClock(server)
    h = Harness(tmp_path, control_plane, StubUpdater(), host)
    assert h.daemon.tick() == "no_slot"
    host.error = timedelta(days=jump_days)
    server.set(SLOT_AT - timedelta(minutes=2))
    assert h.daemon.tick() == "host_clock"
    control_plane.online = False
    # Every minute of the wrong day's window, and of tonight's, on the clock still off.
    for minute in range(0, 20):
        server.set(SLOT_AT - timedelta(days=jump_days, minutes=-minute))
        assert h.daemon.tick() == "offline"
        server.set(SLOT_AT + timedelta(minutes=minute))
        assert h.daemon.tick() == "offline"
    assert UnreachableSlotsFile(h.state_dir / UNREACHABLE_FILE_NAME).load().slots == ()
    assert "slot.unreachable" not in h.event_names()
    # Reached again with the clock right: nothing to report for a day the clock made up.
    host.error = timedelta(0)
    control_plane.online = True
    server.set(SLOT_AT + timedelta(minutes=30))
    assert h.daemon.tick() == "no_slot"
    assert control_plane.unreachable_bodies == []
    assert h.outbox.pending() == []
    assert h.state().last_consumed is None
    assert not (h.state_dir / "outbox" / "rejected").exists()


@pytest.mark.parametrize("jump_days", [3, -3])
def test_a_clock_that_jumps_while_the_control_plane_is_out_of_reach_notes_no_slot(
    tmp_path: Path, jump_days: int
) -> None:
    """The jump comes while no answer can measure it: the time elapsed since the last answer, on
    a clock no one sets, tells it, and the offline minutes on it note nothing, as the online rule
    claims nothing; said once (`clock.disagrees`)."""
    server = ManualClock(SLOT_AT - timedelta(days=1, minutes=2))
    control_plane = FakeControlPlane(now=server.now, contract_version=7)
    host = JumpingClock(server)
    h = Harness(
        tmp_path, control_plane, StubUpdater(), host, elapsed=lambda: server.now().timestamp()
    )
    assert h.daemon.tick() == "no_slot"
    control_plane.online = False
    host.error = timedelta(days=jump_days)
    for minute in range(0, 20):
        server.set(SLOT_AT - timedelta(days=jump_days, minutes=-minute))
        assert h.daemon.tick() == "offline"
        server.set(SLOT_AT + timedelta(minutes=minute))
        assert h.daemon.tick() == "offline"
    assert UnreachableSlotsFile(h.state_dir / UNREACHABLE_FILE_NAME).load().slots == ()
    assert "slot.unreachable" not in h.event_names()
    said = [e for e in h.events() if e["event"] == "clock.disagrees"]
    assert said
    assert all(
        e["measured_offset_seconds"] == pytest.approx(-jump_days * 86400, abs=3600) for e in said
    )
    host.error = timedelta(0)
    control_plane.online = True
    server.set(SLOT_AT + timedelta(minutes=30))
    assert h.daemon.tick() == "no_slot"
    assert control_plane.unreachable_bodies == []
    assert not (h.state_dir / "outbox" / "rejected").exists()


def test_a_suspended_host_offline_for_days_is_no_jump(tmp_path: Path) -> None:
    """The host clock and the clock no one sets move together (a host asleep for days, its boot
    clock counting the sleep): the offline minutes note tonight's slot as usual."""
    server = ManualClock(SLOT_AT - timedelta(days=3, minutes=-30))
    control_plane = FakeControlPlane(now=server.now, contract_version=7)
    h = Harness(
        tmp_path,
        control_plane,
        StubUpdater(),
        JumpingClock(server),
        elapsed=lambda: server.now().timestamp(),
    )
    assert h.daemon.tick() == "no_slot"
    control_plane.online = False
    server.set(SLOT_AT + timedelta(minutes=1))
    assert h.daemon.tick() == "offline"
    [noted] = UnreachableSlotsFile(h.state_dir / UNREACHABLE_FILE_NAME).load().slots
    assert noted.slot_key == SLOT_KEY


def _status_of(h: Harness, now: datetime) -> AgentStatus:
    """`agent status` as it reads the daemon's files (the cached config, the state, the
    activity file)."""
    return AgentStatus(
        agent_id="a",
        control_url="http://control.test",
        daemon_pid=1,
        cached=ConfigCache(h.state_dir / "config-cache.json").load(),
        state=h.state(),
        pending_reports=h.outbox.count(),
        installed_version=None,
        now=now,
        activity=ActivityFile(h.state_dir).load(),
    )


def _says_clock_off(status: AgentStatus) -> bool:
    return any("more than a day off" in line for line in problems(status))


@pytest.mark.parametrize("jump_days", [3, -3])
def test_a_daemon_restarted_offline_on_a_clock_off_plans_as_status_says(
    tmp_path: Path, jump_days: int
) -> None:
    """The last answer found the clock off beyond the bound (the offset kept at the bound, and
    cached so); the daemon restarts while the control plane is out of reach. `agent status` says
    the clock is off from the cache, and the daemon's minutes must agree: no slot of the day the
    clock makes up is noted as unreachable, and the journal says the clock is off."""
    server = ManualClock(SLOT_AT - timedelta(days=1, minutes=2))
    control_plane = FakeControlPlane(now=server.now, contract_version=7)
    host = JumpingClock(server)
    h = Harness(tmp_path, control_plane, StubUpdater(), host)
    host.error = timedelta(days=jump_days)
    assert h.daemon.tick() == "host_clock"
    control_plane.online = False
    before = len(h.events())
    h.restart()
    Activity(
        now=server.now, log=h.log, file=ActivityFile(h.state_dir), stuck_after=10, idle_after=100
    )
    for minute in range(0, 20):
        server.set(SLOT_AT - timedelta(days=jump_days, minutes=-minute))
        assert h.daemon.tick() == "offline"
        server.set(SLOT_AT + timedelta(minutes=minute))
        assert h.daemon.tick() == "offline"
    assert _says_clock_off(_status_of(h, server.now()))
    assert UnreachableSlotsFile(h.state_dir / UNREACHABLE_FILE_NAME).load().slots == ()
    assert "slot.unreachable" not in h.event_names()
    assert "clock.disagrees" in h.event_names()[before:]


def test_a_jump_found_while_offline_shows_in_status_at_once(tmp_path: Path) -> None:
    """The journal says `clock.disagrees` at the first offline minute on the jumped clock; so
    does `agent status`, not only from the next answer — and it stops saying it once the clock
    agrees again."""
    server = ManualClock(SLOT_AT - timedelta(days=1, minutes=2))
    control_plane = FakeControlPlane(now=server.now, contract_version=7)
    host = JumpingClock(server)
    h = Harness(
        tmp_path, control_plane, StubUpdater(), host, elapsed=lambda: server.now().timestamp()
    )
    activity = Activity(
        now=server.now, log=h.log, file=ActivityFile(h.state_dir), stuck_after=10, idle_after=100
    )
    activity.tick_started()
    assert h.daemon.tick() == "no_slot"
    activity.tick_finished("no_slot", None)
    assert not _says_clock_off(_status_of(h, server.now()))
    control_plane.online = False
    host.error = timedelta(days=3)
    server.set(SLOT_AT - timedelta(minutes=5))
    activity.tick_started()
    assert h.daemon.tick() == "offline"
    activity.tick_finished("offline", None)
    assert "clock.disagrees" in h.event_names()
    status = _status_of(h, server.now())
    assert _says_clock_off(status)
    # Still out of reach: the reach is said as well, the clock first of the two.
    assert any("unreachable" in line or "could not reach" in line for line in problems(status))
    host.error = timedelta(0)
    control_plane.online = True
    server.set(SLOT_AT + timedelta(minutes=30))
    activity.tick_started()
    assert h.daemon.tick() == "no_slot"
    activity.tick_finished("no_slot", None)
    assert "clock.agrees" in h.event_names()
    assert not _says_clock_off(_status_of(h, server.now()))
