"""The previous release's tree, extracted once per test session (see `previous_release`)."""

from __future__ import annotations

import pytest

from nachtwacht.demo_world.children import Subprocesses
from tests.rolling.previous_release import extract


@pytest.fixture(scope="session")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Subprocesses:
    """Runs `nachtwacht …` of the previous release: its tree, this interpreter."""
    return Subprocesses(checkout=extract(tmp_path_factory.mktemp("previous-release")))
