"""`bin/package`'s own guards: a command line it does not understand, and an agent's wheel that
would hold what the agent's package leaves out (the build stops instead of shipping it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import BUILD_DEADLINE_SECONDS
from tests.worlds.processes import REPO_ROOT

PACKAGE = REPO_ROOT / "bin" / "package"


def package(*arguments: str | Path, command: Path = PACKAGE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(command), *map(str, arguments)],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_DEADLINE_SECONDS,
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param(
            ["--bogus"],
            "unknown argument '--bogus' (expected --out DIR or --wheel-cache DIR)",
            id="unknown",
        ),
        pytest.param(["--out"], "--out: expected a directory after it", id="out_without_value"),
        pytest.param(
            ["--wheel-cache", ""],
            "--wheel-cache: expected a directory after it",
            id="empty_cache",
        ),
    ],
)
def test_a_command_line_it_does_not_understand_is_refused_naming_it(
    arguments: list[str], message: str
) -> None:
    result = package(*arguments)
    assert result.returncode == 1
    assert result.stderr == f"bin/package: {message}\n"


@pytest.mark.slow
@pytest.mark.timeout(BUILD_DEADLINE_SECONDS + 60)
def test_an_agent_wheel_holding_the_control_plane_stops_the_build(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(
        REPO_ROOT,
        checkout,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "dist", "build", "*.egg-info", "__pycache__", ".*_cache", "tests"
        ),
    )
    agent_project = checkout / "packaging/agent-wheel/pyproject.toml"
    lines = agent_project.read_text().splitlines()
    # A mistake in the agent's package list: the control plane taken in.
    (include,) = (i for i, line in enumerate(lines) if line.startswith("include = "))
    lines[include] = lines[include].replace('["', '["control_plane*", "', 1)
    (exclude,) = (i for i, line in enumerate(lines) if line.startswith("exclude = "))
    lines[exclude] = 'exclude = ["tests*"]'
    agent_project.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    # The checkout's cache holds the build backend, so this needs no download when it is there.
    result = package(
        "--out",
        out,
        "--wheel-cache",
        REPO_ROOT / "dist" / ".wheel-cache",
        command=checkout / "bin/package",
    )
    assert result.returncode == 1
    assert "which the agent's package leaves out" in result.stderr
    assert result.stderr.endswith("bin/package: the agent's wheel is not what it should be\n")
    assert list(out.iterdir()) == []
