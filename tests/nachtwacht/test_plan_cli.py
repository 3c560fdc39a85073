"""`nachtwacht plan`: a preview a person can read; bad input is one clear line and exit code 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from nachtwacht.plan_cli import main

REPO = Path(__file__).resolve().parents[2]


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_spring_example_shows_each_slot_and_the_gap_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--times", "02:30,23:55", "--tz", "Europe/Amsterdam", "--from", "2027-03-27"]
    code, out, err = run([*argv, "--days", "3"], capsys)
    assert (code, err) == (0, "")
    heading, blank, columns, *rows = out.splitlines()
    assert "02:30, 23:55" in heading and "Europe/Amsterdam" in heading and "3 days" in heading
    assert blank == ""
    assert columns.split() == ["slot", "runs", "at", "(local)", "runs", "at", "(UTC)", "note"]
    # Each slot once, in order, at its instant; the one in the spring gap runs an hour later by
    # the wall clock (still 01:30Z) and says so; no other slot has a note.
    slots = [re.split(r"\s{2,}", row, maxsplit=3) for row in rows]
    assert [(slot, utc) for slot, _, utc, *_ in slots] == [
        ("2027-03-27T02:30", "2027-03-27 01:30Z"),
        ("2027-03-27T23:55", "2027-03-27 22:55Z"),
        ("2027-03-28T02:30", "2027-03-28 01:30Z"),
        ("2027-03-28T23:55", "2027-03-28 21:55Z"),
        ("2027-03-29T02:30", "2027-03-29 00:30Z"),
        ("2027-03-29T23:55", "2027-03-29 21:55Z"),
    ]
    notes = {slot[0]: slot[3] for slot in slots if len(slot) == 4}
    assert list(notes) == ["2027-03-28T02:30"]
    assert "does not exist" in notes["2027-03-28T02:30"]
    assert "03:30 CEST" in notes["2027-03-28T02:30"]
    assert slots[2][1] == "Sun 2027-03-28 03:30 CEST"


@pytest.mark.parametrize(
    ("argv", "note"),
    [
        pytest.param(
            ["--times", "02:30", "--from", "2027-10-31", "--days", "1"],
            "02:30 happens twice on 2027-10-31 (CEST, then CET); runs once, at the first",
            id="autumn_repeat",
        ),
        pytest.param(
            ["--times", "02:00,03:00", "--from", "2027-03-28", "--days", "1"],
            "02:00 does not exist on 2027-03-28; it falls on 03:00 CEST, "
            "the same instant as 2027-03-28T03:00: one run for both",
            id="spring_merge",
        ),
        pytest.param(
            ["--times", "03:00", "--tz", "Pacific/Apia", "--from", "2011-12-30", "--days", "2"],
            "03:00 does not exist on 2011-12-30; it falls on 2011-12-31 03:00 +14, "
            "the same instant as 2011-12-31T03:00: one run for both",
            id="apia_skipped_day",
        ),
        pytest.param(
            ["--times", "00:00", "--tz", "America/Santiago", "--from", "2027-09-05", "--days", "1"],
            "00:00 does not exist on 2027-09-05; runs at 01:00 -03",
            id="santiago_missing_midnight",
        ),
    ],
)
def test_daylight_saving_notes(
    argv: list[str], note: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert any(line.endswith(note) for line in out.splitlines()), out


def test_a_day_that_never_happens_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--times", "03:00", "--tz", "Pacific/Apia", "--from", "2011-12-29", "--days", "3"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert out.splitlines()[-1] == (
        "2011-12-30 never happens in Pacific/Apia: the clock skips the whole day, "
        "so its times run with the next day's"
    )
    assert [line[:16] for line in out.splitlines()[3:5]] == ["2011-12-29T03:00", "2011-12-31T03:00"]


def test_a_day_without_transitions_has_no_notes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--times", "02:30", "--from", "2027-01-10", "--days", "2"], capsys)
    assert code == 0
    slot_lines = out.splitlines()[3:]
    assert [line.split("  ")[0] for line in slot_lines] == ["2027-01-10T02:30", "2027-01-11T02:30"]
    assert all(line.endswith("Z") for line in slot_lines)


def test_now_says_what_is_due_and_what_comes_next(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--times", "02:30", "--from", "2027-03-28", "--days", "1", "--now", "2027-03-28T01:35Z"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert out.splitlines()[-3:] == [
        "At 2027-03-28 01:35Z (Sun 2027-03-28 03:35 CEST), catch-up 15 minutes:",
        "  due:  2027-03-28T02:30, opened 2027-03-28 01:30Z, open until 2027-03-28 01:45Z",
        "  next: 2027-03-29T02:30, at Mon 2027-03-29 02:30 CEST (2027-03-29 00:30Z)",
    ]


def test_now_after_the_window_says_nothing_is_due(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--times", "02:30", "--from", "2027-03-28", "--now", "2027-03-28T01:45Z"]
    code, out, _ = run(argv, capsys)
    assert code == 0
    assert "  due:  nothing" in out.splitlines()


def test_without_from_the_day_comes_from_the_programs_clock(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NACHTWACHT_FAKE_CLOCK", "2026-10-24T23:30:00Z,speed=1")
    code, out, err = run(["--days", "1"], capsys)
    assert code == 0
    # 23:30Z on the 24th is already the 25th in Amsterdam: the day is the zone's, not UTC's.
    assert out.splitlines()[0] == "Schedule 03:00 in Europe/Amsterdam: Sun 2026-10-25"
    assert err.startswith("FAKE CLOCK: showing 2026-10-24T23:30:00+00:00")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--times", "03:00,03:07"],
            "--times[1]: '03:07' is not on the five-minute grid (use HH:MM, e.g. 03:05)",
            id="off_grid_time",
        ),
        pytest.param(
            ["--times", "03:00,03:00"],
            "--times[1]: '03:00' repeats --times[0] (each time may appear once)",
            id="duplicate_time",
        ),
        pytest.param(
            ["--times", ""],
            "--times[0]: '' is not a 24-hour time of day (use HH:MM, e.g. 03:05)",
            id="empty_times",
        ),
        pytest.param(
            ["--tz", "Europe/Amsterdamm"],
            "--tz: 'Europe/Amsterdamm' is not a known time zone "
            "(expected an IANA name such as 'Europe/Amsterdam')",
            id="unknown_zone",
        ),
        pytest.param(
            ["--from", "2027-02-30"],
            "--from: '2027-02-30' is not a date (expected YYYY-MM-DD, e.g. 2027-03-27)",
            id="impossible_date",
        ),
        pytest.param(
            ["--from", "9999-12-31"],
            "--from: '9999-12-31' is out of range (expected a date in the years 1900 to 8998)",
            id="date_at_the_end_of_the_calendar",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--days", "0"],
            "--days: '0' is not a whole number of days from 1 to 366",
            id="zero_days",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--days", "three"],
            "--days: 'three' is not a whole number of days from 1 to 366",
            id="days_not_a_number",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--now", "2027-03-28T01:35"],
            "--now: '2027-03-28T01:35' has no offset (expected e.g. 2027-03-28T01:35Z)",
            id="naive_now",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--catch-up", "121"],
            "--catch-up: '121' is not a whole number of minutes from 1 to 120",
            id="catch_up_over_the_contract_bound",
        ),
        pytest.param(
            ["--from", "8998-12-30", "--days", "5"],
            "--days: 5 days from 8998-12-30 run past 8998-12-31 (the last day planned)",
            id="days_past_the_last_planned_day",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--now", "0001-01-01T00:00Z"],
            "--now: '0001-01-01T00:00Z' is out of range "
            "(expected a date in the years 1900 to 8998)",
            id="now_at_the_start_of_the_calendar",
        ),
        pytest.param(
            ["--from", "2027-W13-6"],
            "--from: '2027-W13-6' is not a date (expected YYYY-MM-DD, e.g. 2027-03-27)",
            id="week_date_from",
        ),
        pytest.param(
            ["--from", "2027-086"],
            "--from: '2027-086' is not a date (expected YYYY-MM-DD, e.g. 2027-03-27)",
            id="ordinal_date_from",
        ),
        pytest.param(
            ["--from", "20270327"],
            "--from: '20270327' is not a date (expected YYYY-MM-DD, e.g. 2027-03-27)",
            id="basic_date_from",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--now", "2027-W13-7T01:35Z"],
            "--now: '2027-W13-7T01:35Z' is not an ISO 8601 instant "
            "(expected e.g. 2027-03-28T01:35Z)",
            id="week_date_now",
        ),
        pytest.param(
            ["--from", "2027-01-01", "--now", "20270328T0135Z"],
            "--now: '20270328T0135Z' is not an ISO 8601 instant (expected e.g. 2027-03-28T01:35Z)",
            id="basic_format_now",
        ),
        pytest.param(["--bogus"], "unrecognized arguments: --bogus", id="unknown_option"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert err == f"nachtwacht plan: {message}\n"


def _nachtwacht(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("NACHTWACHT_FAKE_CLOCK", None)
    return subprocess.run(
        [sys.executable, "-m", "nachtwacht", "plan", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )


def test_the_command_runs_as_a_process() -> None:
    done = _nachtwacht("--times", "02:30", "--from", "2027-03-28", "--days", "1")
    assert (done.returncode, done.stderr) == (0, "")
    assert "02:30 does not exist on 2027-03-28; runs at 03:30 CEST" in done.stdout


def test_a_process_given_bad_input_prints_no_traceback() -> None:
    done = _nachtwacht("--times", "25:00")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "nachtwacht plan: --times[0]: '25:00' is not a 24-hour time of day (use HH:MM, e.g. 03:05)"
    ]
