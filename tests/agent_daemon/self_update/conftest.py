"""Fixtures of the self-update tests: an own install root with three complete builds (folders with
`.complete`; the guard never runs one), `current` at 1.0.0 and `previous` at 0.9.0, and a state
directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_daemon.updater.layout import COMPLETE_MARKER, InstallLayout
from tests.agent_daemon.self_update.own_build_kit import NEW, OLD, OLDER


@pytest.fixture
def layout(tmp_path: Path) -> InstallLayout:
    layout = InstallLayout(tmp_path / "own")
    layout.ensure()
    for version in (OLDER, OLD, NEW):
        (layout.version_dir(version) / "venv").mkdir(parents=True)
        (layout.version_dir(version) / COMPLETE_MARKER).write_text("sha\n")
    layout.point("previous", OLDER)
    layout.point("current", OLD)
    return layout


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    path = tmp_path / "state"
    path.mkdir(mode=0o700)
    return path
