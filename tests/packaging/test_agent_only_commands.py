"""The `nachtwacht` command where the agent's package left parts out: a command whose code is not
installed says so in one line, a command whose dependency is missing names it, and `release`
offers what it has. (The installed agent's package runs these for real in test_artifacts.py.)"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nachtwacht import cli, release_cli


def test_a_command_whose_code_is_not_installed_is_one_line_naming_the_package(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(cli.SUBCOMMANDS, "control", ("absent_part_of_nachtwacht.cli", "x"))
    assert cli.main(["control", "serve"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "nachtwacht control: not part of the agent's package (nachtwacht-agent); "
        "it comes with the full package (the nachtwacht wheel that bin/package builds, "
        "installed with its [control-plane] extra)\n"
    )


def test_a_command_whose_dependency_is_missing_names_the_dependency(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The command's own module is there; what it imports is not.
    (tmp_path / "present_part_of_nachtwacht.py").write_text("import absent_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.SUBCOMMANDS, "control", ("present_part_of_nachtwacht", "x"))
    try:
        assert cli.main(["control", "serve"]) == 2
    finally:
        sys.modules.pop("present_part_of_nachtwacht", None)
    assert capsys.readouterr().err == (
        "nachtwacht control: missing dependency 'absent_dependency_xyz' "
        "(install it with: pip install 'nachtwacht[control-plane]')\n"
    )


def test_release_without_the_demo_offers_its_other_commands(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(release_cli, "_demo_installed", lambda: False)
    assert release_cli.main(["--help"]) == 0
    listing = capsys.readouterr().out
    assert "verify" in listing
    assert "build-demo-agent" not in listing


def test_release_with_the_demo_offers_build_demo_agent(capsys: pytest.CaptureFixture[str]) -> None:
    assert release_cli.main(["--help"]) == 0
    assert "build-demo-agent" in capsys.readouterr().out
