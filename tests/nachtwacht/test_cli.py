"""The `nachtwacht` command itself: its answers when no command, help, a version or an unknown
command is asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from nachtwacht.cli import main


def test_no_command_is_a_usage_error_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("nachtwacht: a command is required")
    assert "usage: nachtwacht" in captured.err


def test_help_is_asked_for_and_goes_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "commands:" in capsys.readouterr().out


def test_the_version_is_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"nachtwacht {version('nachtwacht')}\n"


def test_an_unknown_command_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["deploy"]) == 2
    assert capsys.readouterr().err.startswith("nachtwacht: unknown command 'deploy'")


def test_the_installed_command_exits_2_without_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nachtwacht"], capture_output=True, text=True, check=False
    )
    assert (done.returncode, done.stdout) == (2, "")


def test_a_bad_fake_clock_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NACHTWACHT_FAKE_CLOCK", "garbage")
    assert main(["plan", "--times", "03:00"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nachtwacht plan: NACHTWACHT_FAKE_CLOCK: 'garbage' is not")
    assert "Traceback" not in err
    assert err.count("\n") == 1


def test_a_bad_fake_clock_stops_release_sign_with_one_line(tmp_path: Path) -> None:
    build = tmp_path / "build.tar.gz"
    build.write_bytes(b"not signed: the clock is refused first")
    done = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "release", "keygen", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "nachtwacht",
            "release",
            "sign",
            "--key",
            str(tmp_path / "release.key"),
            "--version",
            "1.0.0",
            "--channel",
            "stable",
            "--platform",
            "linux-x86_64",
            "--out",
            str(tmp_path / "out"),
            str(build),
        ],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NACHTWACHT_FAKE_CLOCK": "2026-13-45T00:00:00Z"},
    )
    assert done.returncode == 2
    assert done.stderr.startswith("nachtwacht release: NACHTWACHT_FAKE_CLOCK: ")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()
