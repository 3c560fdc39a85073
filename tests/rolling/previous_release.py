"""The previous release's source tree, from this repository's history.

`previous_release.txt` names the commit (the one place it is written; `.ci/run` reads it too, to
fetch it into a shallow clone). `extract(dest)` writes that commit's tree with `git archive`; its
programs run with this checkout's interpreter and installed dependencies, importing the tree
through `PYTHONPATH` (`nachtwacht.demo_world.children.Subprocesses(checkout=tree)`).
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from tests.worlds.processes import REPO_ROOT

__all__ = ["COMMIT_FILE", "extract", "previous_release_commit"]

COMMIT_FILE = Path(__file__).with_name("previous_release.txt")


def previous_release_commit() -> str:
    lines = [
        line.strip()
        for line in COMMIT_FILE.read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if len(lines) != 1:
        raise AssertionError(f"{COMMIT_FILE}: expected one commit id, found {lines!r}")
    return lines[0]


def extract(dest: Path, *, repo: Path = REPO_ROOT, commit: str | None = None) -> Path:
    """The previous release's tree (or `commit`'s) under `dest`; AssertionError saying what is
    missing when the checkout `repo` cannot give it (no git history, a shallow clone, a commit
    not fetched)."""
    commit = commit or previous_release_commit()

    def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, check=False, timeout=300
        )

    if _git("rev-parse", "--git-dir").returncode != 0:
        raise AssertionError(
            f"{repo} is not a git checkout: the rolling-upgrade tests take the previous "
            f"release ({commit}) from the repository's history"
        )
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == b"true"
        raise AssertionError(
            f"the previous release's commit {commit} (named in {COMMIT_FILE.name}) is not in "
            "this clone"
            + (": it is shallow — run `git fetch --unshallow`" if shallow else "")
            + f" (or `git fetch origin {commit}`); .ci/run does this"
        )
    archived = _git("archive", "--format=tar", commit)
    if archived.returncode != 0:
        raise AssertionError(
            f"git archive {commit} failed: {archived.stderr.decode(errors='replace').strip()}"
        )
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archived.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest
