"""`nachtwacht agent hold | release-hold | update-now`: the dates a person types, the requests
against the contract (the test fake), and following a manual update to its outcome through the
daemon's own files."""

from __future__ import annotations

import re
import stat
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx
import pytest

from agent_daemon.commands.host_commands import UsageProblem, follow_manual_update, parse_until
from agent_daemon.commands.host_verbs_cli import hold
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import BadServerAnswer
from agent_daemon.host.activity import Activity, ActivityFile
from agent_daemon.settings import resolve_paths
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from ground.contract import HoldRequest, RefusalCode
from tests.agent_daemon.commands.test_network_cli import write_enrolled_config
from tests.agent_daemon.daemon_support.fake_control_plane import (
    CREDENTIAL,
    ClaimRefusal,
    FakeControlPlane,
)
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

AMSTERDAM = ZoneInfo("Europe/Amsterdam")
# 2026-11-30 10:00 in Amsterdam (UTC+1).
NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-12-05", datetime(2026, 12, 4, 23, 0, tzinfo=UTC), id="date_is_00_00"),
        pytest.param(
            "2026-12-05 06:30", datetime(2026, 12, 5, 5, 30, tzinfo=UTC), id="date_and_time"
        ),
        pytest.param(
            "2026-12-05T06:30", datetime(2026, 12, 5, 5, 30, tzinfo=UTC), id="date_t_time"
        ),
        pytest.param("14:00", datetime(2026, 11, 30, 13, 0, tzinfo=UTC), id="time_later_today"),
        pytest.param("06:00", datetime(2026, 12, 1, 5, 0, tzinfo=UTC), id="time_passed_tomorrow"),
        pytest.param(
            "2027-03-28 02:30", datetime(2027, 3, 28, 1, 30, tzinfo=UTC), id="spring_gap_0230"
        ),
        pytest.param(
            "2026-12-01T04:00Z", datetime(2026, 12, 1, 4, 0, tzinfo=UTC), id="instant_with_z"
        ),
    ],
)
def test_until_reads_dates_and_times_in_the_platform_zone(text: str, expected: datetime) -> None:
    assert parse_until(text, now=NOW, zone=AMSTERDAM) == expected


@pytest.mark.parametrize(
    ("text", "words"),
    [
        pytest.param("2026-11-01", "is not in the future", id="past_date"),
        pytest.param("2026-11-30T08:00Z", "is not in the future", id="past_instant"),
        pytest.param("tomorrow", "is not a date or time", id="words"),
        pytest.param("25:00", "is not a date or time", id="hour_25"),
        pytest.param("2026-02-30", "is not a date or time", id="february_30"),
        pytest.param("2026-12-01T04:00:00", "is not a date or time", id="naive_instant"),
        pytest.param("2026-W49-2", "is not a date or time", id="week_date"),
        pytest.param("2026-335", "is not a date or time", id="ordinal_date"),
        pytest.param("20261201", "is not a date or time", id="basic_date"),
        pytest.param("2026-W49-2T04:00Z", "is not a date or time", id="week_date_instant"),
        pytest.param("20261201T0400Z", "is not a date or time", id="basic_instant"),
        pytest.param("2026-12-01T04Z", "is not a date or time", id="hour_alone_instant"),
        pytest.param(
            "\u0660\u0666:\u0660\u0660", "is not a date or time", id="arabic_indic_digits"
        ),
        pytest.param("9999-12-31T23:59:59-12:00", "is out of range", id="after_year_9999_utc"),
        pytest.param(
            "9999-12-31",
            "is out of range (expected a date in the years 1900 to 8999)",
            id="past_the_planners_years",
        ),
        pytest.param("1800-01-01 03:00", "is out of range", id="before_the_planners_years"),
        pytest.param("0001-01-01T00:00:00+14:00", "is out of range", id="before_year_1_utc"),
    ],
)
def test_an_until_that_cannot_be_used_names_the_value(text: str, words: str) -> None:
    with pytest.raises(UsageProblem, match=re.escape(f"--until: '{text}' {words}")):
        parse_until(text, now=NOW, zone=AMSTERDAM)


def _client(plane: FakeControlPlane, clock: ManualClock) -> ControlPlaneClient:
    http = build_http_client(
        base_url="http://control.test",
        credential=CREDENTIAL,
        timeout_seconds=5,
        transport=plane.transport(),
    )
    return ControlPlaneClient(http=http, server_clock=ServerClock(clock))


def test_a_hold_is_sent_and_the_config_carries_it_until_released() -> None:
    clock = ManualClock(NOW)
    plane = FakeControlPlane(now=clock.now)
    client = _client(plane, clock)
    until = NOW + timedelta(days=2)
    held = client.set_hold(HoldRequest(until=until, reason="database maintenance"))
    assert (held.until, held.reason, held.set_by) == (until, "database maintenance", "agent")
    assert plane.config().hold == held
    client.release_hold()
    assert plane.config().hold is None
    with pytest.raises(BadServerAnswer, match=r"DELETE /v1/agent/hold: refused \(404"):
        client.release_hold()


def test_a_control_plane_without_the_route_says_to_upgrade_it() -> None:
    clock = ManualClock(NOW)

    def older(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"detail": "Not Found"})

    http = build_http_client(
        base_url="http://control.test",
        credential=CREDENTIAL,
        timeout_seconds=5,
        transport=httpx.MockTransport(older),
    )
    client = ControlPlaneClient(http=http, server_clock=ServerClock(clock))
    with pytest.raises(BadServerAnswer, match=r"does not offer this \(404\); .* upgrade"):
        client.request_manual_update()


def test_asking_twice_for_an_update_follows_the_one_pending_run() -> None:
    clock = ManualClock(NOW)
    plane = FakeControlPlane(now=clock.now)
    client = _client(plane, clock)
    first = client.request_manual_update()
    second = client.request_manual_update()
    assert first.run_id == second.run_id
    assert plane.config().manual_update is not None
    assert plane.config().manual_update.run_id == first.run_id


def _follow(
    h: Harness, run_id: str, said: list[str], *, running: bool = True
) -> tuple[bool, str | None]:
    result = follow_manual_update(
        run_id,
        state=h.store,
        activity=ActivityFile(h.state_dir),
        daemon_running=lambda: running,
        say=said.append,
        sleep=lambda _s: time.sleep(0.01),
        poll_seconds=0.01,
        timeout_seconds=30,
        monotonic=time.monotonic,
    )
    return result.succeeded, None if result.record is None else result.record.status


def _harness(tmp_path: Path, updater: StubUpdater) -> tuple[Harness, Activity]:
    clock = ManualClock(NOW)
    plane = FakeControlPlane(now=clock.now)
    h = Harness(tmp_path, plane, updater, clock)
    activity = Activity(
        now=clock.now,
        log=h.log,
        file=ActivityFile(tmp_path),
        stuck_after=600,
        idle_after=600,
    )
    return h, activity


def test_update_now_follows_the_run_to_success_saying_its_progress(tmp_path: Path) -> None:
    updater = StubUpdater()
    h, activity = _harness(tmp_path, updater)
    release_tick = threading.Event()

    def downloading(request: UpdateRequest) -> UpdateOutcome | None:
        activity.progress("download", 11_000_000, 22_000_000)
        release_tick.wait(5)
        return None

    updater.on_apply = downloading
    run_id = str(_client(h.control_plane, ManualClock(NOW)).request_manual_update().run_id)
    said: list[str] = []
    minute = threading.Thread(target=h.daemon.tick)
    minute.start()

    def release_once_progress_was_said(words: str) -> None:
        said.append(words)
        if words.startswith("downloading"):
            release_tick.set()

    result = follow_manual_update(
        run_id,
        state=h.store,
        activity=ActivityFile(h.state_dir),
        daemon_running=lambda: True,
        say=release_once_progress_was_said,
        sleep=lambda _s: time.sleep(0.01),
        poll_seconds=0.01,
        timeout_seconds=30,
        monotonic=time.monotonic,
    )
    minute.join()
    assert result.succeeded
    assert result.record is not None and result.record.version == "1.5.0"
    assert "downloading 1.5.0 (50 %, 10.5 of 21.0 MB)" in said


def test_update_now_ends_in_failure_when_the_claim_is_refused(tmp_path: Path) -> None:
    h, _ = _harness(tmp_path, StubUpdater())
    run_id = str(_client(h.control_plane, ManualClock(NOW)).request_manual_update().run_id)
    h.control_plane.refuse_claims_with = ClaimRefusal.of(RefusalCode.RUN_FINISHED)
    assert h.daemon.tick() == "manual_refused"
    said: list[str] = []
    assert _follow(h, run_id, said) == (False, RefusalCode.RUN_FINISHED.value)


def test_update_now_without_a_running_daemon_says_so(tmp_path: Path) -> None:
    # Not "stopped before the update ended", nor "waiting for the daemon": it never ran.
    h, _ = _harness(tmp_path, StubUpdater())
    said: list[str] = []
    assert _follow(h, str(uuid.uuid4()), said, running=False) == (False, None)
    assert said == [
        "the daemon is not running: the request stays filed, and the daemon takes it up at its "
        "first minute once it runs (systemctl start nachtwacht-agent)"
    ]


def test_update_now_says_when_the_daemon_stops_while_it_follows(tmp_path: Path) -> None:
    h, _ = _harness(tmp_path, StubUpdater())
    answers = iter([True, False])
    said: list[str] = []
    result = follow_manual_update(
        str(uuid.uuid4()),
        state=h.store,
        activity=ActivityFile(h.state_dir),
        daemon_running=lambda: next(answers),
        say=said.append,
        sleep=lambda _s: None,
        poll_seconds=0.01,
        timeout_seconds=30,
        monotonic=time.monotonic,
    )
    assert result.record is None
    assert said[-1] == "the daemon stopped before the update ended; the request stays filed"


@pytest.mark.parametrize(
    ("reason", "words"),
    [
        pytest.param("maintenance\x1b[2J", "contains the control character U+001B", id="escape"),
        pytest.param("db\u202enoitpecxe", "contains the bidirectional control U+202E", id="bidi"),
        pytest.param("caf\udce9", "is not UTF-8 text", id="bytes_not_utf8"),
        pytest.param("x" * 501, "is longer than 500 characters", id="too_long"),
        pytest.param("y" * 100_000, "is longer than 500 characters", id="huge"),
    ],
)
def test_a_hold_reason_that_cannot_be_sent_is_named_before_anything_is_asked(
    tmp_path: Path, reason: str, words: str
) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    before = _files_under(tmp_path)
    # The config names a control plane nobody answers for: the refusal comes before any request.
    shown = repr(reason if len(reason) <= 40 else reason[:39] + "…")
    with pytest.raises(UsageProblem) as refused:
        hold(
            resolve_paths(state_dir=str(host.state_dir), config_file=None, environ={}),
            until="2099-01-01",
            reason=reason,
        )
    assert str(refused.value).startswith(f"--reason: {shown} {words}")
    assert "\x1b" not in str(refused.value)
    assert "\u202e" not in str(refused.value)
    assert _files_under(tmp_path) == before


def test_a_hold_with_an_impossible_date_or_reason_says_one_line_and_changes_nothing(
    tmp_path: Path,
) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    before = _files_under(tmp_path)
    for args in (
        ("--until", "9999-12-31T23:59:59-12:00"),
        ("--until", "2099-01-01", "--reason", "z" * 3000),
    ):
        result = run_agent("hold", "--state-dir", str(host.state_dir), *args)
        assert result.returncode == 2, result.stderr
        assert "Traceback" not in result.stderr
        assert len(result.stderr.splitlines()) == 1, result.stderr
        assert result.stderr.startswith(f"nachtwacht agent hold: {args[-2]}: "), result.stderr
        assert result.stdout == ""
    assert _files_under(tmp_path) == before


def _files_under(root: Path) -> dict[str, tuple[int, bytes | None]]:
    seen: dict[str, tuple[int, bytes | None]] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        data = path.read_bytes() if stat.S_ISREG(info.st_mode) else None
        seen[str(path.relative_to(root))] = (info.st_mode, data)
    return seen
