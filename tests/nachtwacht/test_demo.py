"""`nachtwacht demo`: a small night end to end as a real process (real control plane, real
daemons, real PostgreSQL), what it prints, and that it leaves nothing running and nothing behind
— also when it is stopped half-way. Bad options are one line, never a stack trace."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import date
from pathlib import Path

import httpx
import pytest

from nachtwacht.demo_night.errors import DemoUsageError
from nachtwacht.demo_night.night import local_label, night_of
from nachtwacht.demo_night.options import DEFAULT_SIZES, parse_options
from nachtwacht.demo_world.hosts import write_health_script
from tests.worlds.processes import REPO_ROOT, child_environment
from tests.worlds.waiting import wait_until

# A deadline for a failure, never a speed assertion: the demo plays a 40-minute night.
DEMO_DEADLINE_SECONDS = 280
AMSTERDAM = "Europe/Amsterdam"


def demo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nachtwacht.cli", "demo", *args]


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        demo_command(*args),
        env=child_environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=DEMO_DEADLINE_SECONDS,
    )


def demo_folder(output: str) -> Path:
    match = re.search(r"everything lives in (\S+)", output)
    assert match, output
    return Path(match.group(1))


def processes_using(folder: Path) -> list[str]:
    """Command lines of every process on this machine that names the demo's folder."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in command:
            found.append(f"{entry.name}: {command}")
    return found


def final_row(output: str, org: str) -> list[str]:
    """The numbers of an organisation's row in the table printed after the night."""
    report = output.split("as the control plane recorded it:", 1)[1]
    line = next(line for line in report.splitlines() if line.strip().startswith(org))
    return line.strip()[len(org) :].split()


# -- the whole night, real processes --------------------------------------------------------------


@pytest.mark.slow
def test_a_small_night_updates_every_agent_and_leaves_nothing_behind() -> None:
    result = run_demo("--orgs", "2", "--agents", "2", "--speed", "30", "--date", "2026-12-01")
    output = result.stdout
    assert result.returncode == 0, output + result.stderr
    assert "4 real agent processes in 2 organisation(s)" in output
    assert "the night runs from 02:50 CET to 03:30 CET" in output
    # The live lines: nothing due before 03:00, then tokens and updates.
    assert re.search(r"^02:5\d CET \| Acme Logistics: 2 not due yet", output, re.MULTILINE)
    # agents, updated, updating, waiting, up to date, missed, not due yet
    assert final_row(output, "Acme Logistics") == ["2", "2", "0", "0", "0", "0", "0"]
    assert final_row(output, "Borealis Bakery") == ["2", "2", "0", "0", "0", "0", "0"]
    # Every agent took one token, within the caps. Usually all four in the 03:00 round, but each
    # daemon asks at its own second of the minute, and one whose second is late in it, held up
    # by a busy machine for a fraction of a real second (a platform minute is 2 s here), asks in
    # the 03:01 round instead — as right (seen once in CI).
    per_round = re.search(r"grants per round: (.*?)  \(caps", output)
    assert per_round, output
    counts = [int(n) for n in re.findall(r"\d\d:\d\d (\d+)", per_round.group(1))]
    assert sum(counts) == 4, output
    assert f"most tokens in one round: {max(counts)} of the global cap 25 — held" in output
    # One agent's own log, and the control plane's record of it: the schedule is the actor.
    timeline = output.split("one agent's night", 1)[1]
    assert "claim.granted" in timeline
    assert "update.succeeded" in timeline
    assert "update.scheduled       by schedule" in timeline
    assert "notifications:" in output
    folder = demo_folder(output)
    assert not folder.exists(), f"{folder} was left behind"
    assert processes_using(folder) == []
    assert "Traceback" not in result.stderr


# -- simulated agents, --keep ---------------------------------------------------------------------


@pytest.mark.slow
def test_above_the_process_limit_agents_are_simulated_and_keep_leaves_the_plane_running() -> None:
    result = run_demo(
        "--agents",
        "3,1",
        "--process-limit",
        "2",
        "--speed",
        "240",
        "--date",
        "2026-12-01",
        "--keep",
    )
    output = result.stdout
    folder = demo_folder(output)
    pid_match = re.search(r"stop it with: kill (\d+)", output)
    try:
        assert result.returncode == 0, output + result.stderr
        assert "4 simulated agents in 2 organisation(s)" in output
        assert final_row(output, "Acme Logistics")[:2] == ["3", "3"]
        assert "as the simulated agent saw it:" in output
        assert pid_match, output
        pid = int(pid_match.group(1))
        os.kill(pid, 0)  # the control plane still runs
        assert (folder / "credentials.json").stat().st_mode & 0o777 == 0o600
        # It ends with the panel's door: its URL and a key that signs in there.
        door, key_line = output.rstrip("\n").splitlines()[-2:]
        panel_url = re.fullmatch(r"the panel: (http://127\.0\.0\.1:\d+/panel/)", door)
        key = re.fullmatch(r"  sign in with Acme Logistics's panel key: (nwp_\S+)", key_line)
        assert panel_url and key, output
        with httpx.Client(timeout=30) as client:
            form = client.get(panel_url.group(1) + "sign-in")
            token = form.text.split('name="csrf" value="', 1)[1].split('"', 1)[0]
            signed_in = client.post(
                panel_url.group(1) + "sign-in", data={"key": key.group(1), "csrf": token}
            )
            # Eight real seconds are 32 minutes on the demo's 240x clock, past the panel's idle
            # limit: the session still holds, because sessions run on real time.
            time.sleep(8)
            still = client.get(panel_url.group(1) + "agents")
            # The simulated agents switch only with the control plane's permit, as the daemon
            # does: their updates are recorded as updates, never as unauthorised switches.
            api = panel_url.group(1).removesuffix("/panel/")
            bearer = {"Authorization": f"Bearer {key.group(1)}"}
            agents = client.get(f"{api}/v1/agents", headers=bearer).json()["agents"]
            statuses = Counter(
                run["status"]
                for agent in agents
                for run in client.get(f"{api}/v1/agents/{agent['id']}/runs", headers=bearer).json()[
                    "runs"
                ]
            )
        assert statuses["unauthorised"] == 0 and statuses["succeeded"] >= 1, statuses
        assert signed_in.status_code == 303, signed_in.text
        assert signed_in.headers["location"] == "/panel/agents"
        assert still.status_code == 200, still.headers.get("location")
    finally:
        if pid_match:
            os.kill(int(pid_match.group(1)), signal.SIGTERM)
            _wait_until_gone(folder)
        shutil.rmtree(folder, ignore_errors=True)
    assert processes_using(folder) == []


def _wait_until_gone(folder: Path) -> None:
    wait_until(
        lambda: not processes_using(folder),
        what=lambda: f"the processes using {folder} to end: {processes_using(folder)}",
        timeout=60,
        interval=0.2,
    )


# -- stopped half-way -----------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_during_the_night_stops_everything_it_started() -> None:
    process = subprocess.Popen(
        demo_command("--agents", "2", "--speed", "30", "--date", "2026-12-01"),
        env=child_environment(),
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if "daemons started" in line:
            break
    folder = demo_folder("".join(lines))
    assert processes_using(folder), "the daemons should be running now"
    process.send_signal(signal.SIGTERM)
    rest, errors = process.communicate(timeout=DEMO_DEADLINE_SECONDS)
    assert process.returncode == 130, "".join(lines) + rest + errors
    assert "interrupted; stopping everything it started" in rest
    assert "Traceback" not in errors
    assert not folder.exists()
    assert processes_using(folder) == []


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--speed", "0"], "--speed: 0.0 is not a speed-up", id="speed_zero"),
        pytest.param(["--speed", "fast"], "--speed: 'fast' is not a number", id="speed_word"),
        pytest.param(["--speed", "nan"], "--speed: nan is not a speed-up", id="speed_nan"),
        pytest.param(["--speed", "100000"], "at most 600", id="speed_too_high"),
        pytest.param(["--agents", "4,x"], "--agents: '4,x' is not a list", id="agents_word"),
        pytest.param(["--agents", "0"], "--agents: '0' is not a list", id="agents_zero"),
        pytest.param(["--agents", "3000,3000"], "more than the demo's 5000", id="agents_too_many"),
        pytest.param(["--orgs", "0"], "--orgs: 0 must be at least 1", id="orgs_zero"),
        pytest.param(
            ["--orgs", "2", "--agents", "1,2,3"],
            "gives 3 organisation sizes but --orgs is 2",
            id="orgs_mismatch",
        ),
        pytest.param(
            ["--date", "2026-13-01"], "--date: '2026-13-01' is not a date", id="date_month_13"
        ),
        pytest.param(
            ["--date", "2026-W43-7"], "--date: '2026-W43-7' is not a date", id="date_week_date"
        ),
        pytest.param(["--date", "2026-298"], "--date: '2026-298' is not a date", id="date_ordinal"),
        pytest.param(["--date", "20261025"], "--date: '20261025' is not a date", id="date_basic"),
        pytest.param(
            ["--date", "0100-10-25"],
            "--date: '0100-10-25' is out of range (expected a night in the years 1901 to 8998",
            id="date_outside_planner",
        ),
        pytest.param(
            ["--date", "9999-12-31"],
            "--date: '9999-12-31' is out of range (expected a night in the years 1901 to 8998",
            id="date_last_day",
        ),
        pytest.param(
            ["--date", "1901-01-02"],
            "--date: '1901-01-02' is out of range (expected a night in the years 1901 to 8998",
            id="date_clock_before_the_years",
        ),
        pytest.param(
            ["--date", "8999-06-01"],
            "--date: '8999-06-01' is out of range (expected a night in the years 1901 to 8998;",
            id="date_past_the_years",
        ),
        pytest.param(
            ["--process-limit", "-1"],
            "--process-limit: '-1' is not a number of agents (expected 0 or more, e.g. 60)",
            id="limit_negative",
        ),
        # Digits `int` takes but a person did not type as a number here.
        pytest.param(["--agents", "²"], "--agents: '²' is not a list", id="agents_superscript"),
        pytest.param(["--agents", "٣"], "--agents: '٣' is not a list", id="agents_arabic_digit"),
        pytest.param(["--agents", "1_0"], "--agents: '1_0' is not a list", id="agents_underscore"),
        pytest.param(
            ["--orgs", "²"], "--orgs: '²' is not a number of organisations", id="orgs_superscript"
        ),
        pytest.param(
            ["--process-limit", "²"],
            "--process-limit: '²' is not a number of agents",
            id="limit_superscript",
        ),
        pytest.param(["--colour"], "unrecognized arguments: --colour", id="unknown_option"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(args: list[str], expected: str) -> None:
    result = run_demo(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("nachtwacht demo: ")
    assert expected in lines[0]


# -- options and the night, in-process ------------------------------------------------------------


def _options(*args: str) -> tuple[int, ...]:
    from datetime import UTC, datetime

    return parse_options(list(args), now=datetime(2026, 11, 30, 12, tzinfo=UTC)).org_sizes


@pytest.mark.parametrize(
    ("args", "sizes"),
    [
        pytest.param([], DEFAULT_SIZES, id="default_40_8_1"),
        pytest.param(["--agents", "2", "--orgs", "3"], (2, 2, 2), id="one_size_for_every_org"),
        pytest.param(["--agents", "5,1"], (5, 1), id="one_size_per_org"),
        pytest.param(["--orgs", "4"], (40, 8, 1, 40), id="orgs_cycle_the_default_sizes"),
    ],
)
def test_agents_and_orgs_make_the_fleet(args: list[str], sizes: tuple[int, ...]) -> None:
    assert _options(*args) == sizes


def test_the_default_night_is_the_coming_one_in_the_platform_zone() -> None:
    from datetime import UTC, datetime

    # 23:30 UTC on the 30th is already 00:30 on 1 December in Amsterdam: the night after that.
    late = parse_options([], now=datetime(2026, 11, 30, 23, 30, tzinfo=UTC))
    assert late.night_of == date(2026, 12, 2)


def test_a_fleet_within_the_process_limit_is_real_processes() -> None:
    from datetime import UTC, datetime

    now = datetime(2026, 11, 30, 12, tzinfo=UTC)
    assert parse_options(["--agents", "5", "--process-limit", "5"], now=now).real_processes
    assert not parse_options(["--agents", "6", "--process-limit", "5"], now=now).real_processes


def test_a_bad_option_raises_a_usage_error_naming_it() -> None:
    from datetime import UTC, datetime

    with pytest.raises(DemoUsageError, match=re.escape("--speed: -3.0")):
        parse_options(["--speed", "-3"], now=datetime(2026, 11, 30, tzinfo=UTC))


@pytest.mark.parametrize(
    ("day", "start", "slot", "end", "minutes", "note"),
    [
        pytest.param(
            "2026-12-01", "02:50 CET", "03:00 CET", "03:30 CET", 40, None, id="winter_night"
        ),
        pytest.param(
            "2027-06-15", "02:50 CEST", "03:00 CEST", "03:30 CEST", 40, None, id="summer_night"
        ),
        pytest.param(
            "2026-10-25",
            "02:50 CEST",
            "03:00 CET",
            "03:30 CET",
            100,
            "ends",
            id="autumn_repeat_hour",
        ),
        pytest.param(
            "2027-03-28",
            "01:50 CET",
            "03:00 CEST",
            "03:30 CEST",
            40,
            "starts",
            id="spring_gap_0250_missing",
        ),
    ],
)
def test_the_night_spans_0250_to_0330_with_daylight_saving(
    day: str, start: str, slot: str, end: str, minutes: int, note: str | None
) -> None:
    night = night_of(date.fromisoformat(day), AMSTERDAM)
    assert local_label(night.start, AMSTERDAM) == start
    assert local_label(night.slot_at, AMSTERDAM) == slot
    assert local_label(night.end, AMSTERDAM) == end
    assert night.minutes == minutes
    described = night.daylight_saving_note()
    if note is None:
        assert described is None
    else:
        assert described is not None and f"daylight saving {note} tonight" in described


# -- the managed agent's health command -----------------------------------------------------------


def _heartbeat(path: Path, *, pid: int, age: float) -> Path:
    path.write_text(json.dumps({"version": "1.1.0", "pid": pid, "time": time.time() - age}))
    return path


@pytest.fixture
def health(tmp_path: Path) -> Path:
    return write_health_script(tmp_path / "agent-health")


def _probe(script: Path, heartbeat: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), str(heartbeat)], capture_output=True, text=True, check=False, timeout=30
    )


def test_health_prints_the_version_the_running_agent_reported(health: Path, tmp_path: Path) -> None:
    result = _probe(health, _heartbeat(tmp_path / "beat.json", pid=os.getpid(), age=0))
    assert (result.returncode, result.stdout.strip()) == (0, "1.1.0")


@pytest.mark.parametrize(
    ("pid", "age", "reason"),
    [
        pytest.param(None, 60, "is 60 s old", id="stale_heartbeat_of_a_hung_agent"),
        pytest.param(2**22 + 1, 0, "is gone", id="writer_no_longer_running"),
    ],
)
def test_health_refuses_an_agent_that_is_not_really_running(
    health: Path, tmp_path: Path, pid: int | None, age: float, reason: str
) -> None:
    beat = _heartbeat(tmp_path / "beat.json", pid=pid or os.getpid(), age=age)
    result = _probe(health, beat)
    assert result.returncode == 1
    assert reason in result.stderr


def test_health_refuses_when_there_is_no_heartbeat(health: Path, tmp_path: Path) -> None:
    result = _probe(health, tmp_path / "missing.json")
    assert result.returncode == 1
    assert "no heartbeat" in result.stderr


def test_an_unexpected_failure_is_one_line_not_a_stack_trace(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import nachtwacht.demo_night.run
    from nachtwacht import demo

    def broken(options: object) -> int:
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(nachtwacht.demo_night.run, "run_demo", broken)
    assert demo.main(["--agents", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.err == (
        "nachtwacht demo: stopped by an unexpected RuntimeError: the disk went away "
        "(run with --keep to inspect the logs it leaves)\n"
    )
