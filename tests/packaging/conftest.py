"""The artifacts `bin/package` builds, built once per test run.

`artifacts` runs `bin/package --out <folder>` the first time a test asks and hands every later
test (of any module, on any xdist worker) the same folder: the build takes a minute or more, the
first time longer, since it downloads every dependency as a registry wheel into the repository's
`dist/.wheel-cache` (later runs find them there and need no network).
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.worlds.processes import REPO_ROOT

# A deadline for a build that hangs, never a speed assertion.
BUILD_DEADLINE_SECONDS = 1500
ARCHES = {"x86_64": "amd64", "aarch64": "arm64"}


@dataclass(frozen=True)
class Artifacts:
    folder: Path
    version: str

    @property
    def full_wheel(self) -> Path:
        return self.folder / f"nachtwacht-{self.version}-py3-none-any.whl"

    @property
    def agent_wheel(self) -> Path:
        return self.folder / f"nachtwacht_agent-{self.version}-py3-none-any.whl"

    def bundle(self, arch: str) -> Path:
        return self.folder / f"nachtwacht-agent-bundle-{self.version}-linux-{arch}.tar.gz"

    def deb(self, arch: str) -> Path:
        return self.folder / f"nachtwacht-agent_{self.version}_{ARCHES[arch]}.deb"

    def unpacked_bundle(self, arch: str, into: Path) -> Path:
        with tarfile.open(self.bundle(arch)) as archive:
            archive.extractall(into, filter="tar")
        return into / f"nachtwacht-agent-bundle-{self.version}-linux-{arch}"


def _project_version() -> str:
    found = re.search(r'^version = "([^"]+)"$', (REPO_ROOT / "pyproject.toml").read_text(), re.M)
    assert found is not None
    return found.group(1)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Artifacts]:
    base = tmp_path_factory.getbasetemp()
    # Under xdist each worker has its own base folder inside the run's: share the run's.
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    folder = shared / "artifacts"
    built = shared / "artifacts.built"
    with (shared / "artifacts.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not built.exists():
            result = subprocess.run(
                [str(REPO_ROOT / "bin" / "package"), "--out", str(folder)],
                env={**os.environ, "PYTHON": sys.executable},
                capture_output=True,
                text=True,
                check=False,
                timeout=BUILD_DEADLINE_SECONDS,
            )
            assert result.returncode == 0, result.stderr[-4000:]
            built.write_text(result.stdout)
    yield Artifacts(folder=folder, version=_project_version())
