"""The previous release is taken from the repository's own history, or the test says why not."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from control_plane.api.agent_contract import (
    AGENT_RELEASES_SUPPORTED_BACK,
    CONTRACT_BEFORE_HEADER,
    OLDEST_AGENT_CONTRACT,
)
from ground.contract import CONTRACT_VERSION
from nachtwacht.demo_world.children import Subprocesses
from tests.rolling.previous_release import COMMIT_FILE, extract, previous_release_commit
from tests.worlds.processes import REPO_ROOT


def test_the_tree_is_the_commits(tmp_path: Path) -> None:
    tree = extract(tmp_path / "tree")
    assert (tree / "ground" / "contract" / "__init__.py").is_file()
    assert (tree / "control_plane" / "migrations" / "versions").is_dir()
    assert len(previous_release_commit()) == 40


def test_a_shallow_clone_without_the_commit_is_named_with_the_fix(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(
        ["git", "clone", "--quiet", "--depth", "1", f"file://{REPO_ROOT}", str(clone)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    # The shallow clone's one commit is HEAD; any commit before it is missing.
    with pytest.raises(AssertionError) as caught:
        extract(tmp_path / "tree", repo=clone, commit=previous_release_commit())
    message = str(caught.value)
    assert f"{previous_release_commit()} (named in {COMMIT_FILE.name}) is not in this clone" in (
        message
    )
    assert "it is shallow — run `git fetch --unshallow`" in message


def test_a_folder_without_history_is_named(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match="is not a git checkout"):
        extract(tmp_path / "tree", repo=tmp_path)


def test_its_programs_import_the_previous_tree_not_this_checkout(
    previous_release: Subprocesses,
) -> None:
    tree = previous_release.checkout
    assert tree is not None
    found = subprocess.run(
        [sys.executable, "-c", "import agent_daemon, control_plane; "
         "print(agent_daemon.__file__); print(control_plane.__file__)"],
        env=previous_release.environment(),
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )  # fmt: skip
    for line in found.stdout.splitlines():
        assert Path(line).resolve().is_relative_to(tree.resolve()), found.stdout


def test_the_previous_releases_agents_speak_a_contract_this_control_plane_serves(
    previous_release: Subprocesses,
) -> None:
    assert previous_release.checkout is not None
    source = (previous_release.checkout / "ground" / "contract" / "__init__.py").read_text()
    found = re.search(r"^CONTRACT_VERSION = (\d+)$", source, re.MULTILINE)
    theirs = CONTRACT_BEFORE_HEADER if found is None else int(found.group(1))
    assert OLDEST_AGENT_CONTRACT <= theirs <= CONTRACT_VERSION
    # What the rolling tests cover: the previous release's agent, one release back.
    assert AGENT_RELEASES_SUPPORTED_BACK == 1
