"""Upgrading the agent's .deb keeps an enrolled host as it was: the environment is updated in
place to the new version from the new package's wheels, with no network, and the units stay
enabled, the configuration and the state untouched (an upgrade is not a remove)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.conftest import BUILD_DEADLINE_SECONDS, Artifacts
from tests.packaging.throwaway_root import HOST_ARCH, ThrowawayRoot, why_not_here
from tests.worlds.processes import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * BUILD_DEADLINE_SECONDS)]

ENROLLED = (
    "mkdir -p /etc/nachtwacht-agent /var/lib/nachtwacht-agent && "
    "echo 'url = \"https://control.example\"' > /etc/nachtwacht-agent/agent.toml && "
    "echo '{}' > /var/lib/nachtwacht-agent/state.json"
)


def _next_version(version: str) -> str:
    *leading, last = version.split(".")
    return ".".join([*leading, str(int(last) + 1)])


@pytest.fixture(scope="module")
def packages(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A folder holding this checkout's .deb and one of the next version, and that version."""
    why_not = why_not_here()
    if why_not is not None:
        pytest.skip(why_not)
    folder = tmp_path_factory.mktemp("upgrade")
    checkout = folder / "checkout"
    shutil.copytree(
        REPO_ROOT,
        checkout,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "dist", "build", "*.egg-info", "__pycache__", ".*_cache", "tests"
        ),
    )
    newer = _next_version(artifacts.version)
    project = checkout / "pyproject.toml"
    project.write_text(
        re.sub(
            r'^version = ".*"$', f'version = "{newer}"', project.read_text(), count=1, flags=re.M
        )
    )
    debs = folder / "debs"
    built = subprocess.run(
        [
            str(checkout / "bin/package"),
            "--out",
            str(debs),
            "--wheel-cache",
            str(REPO_ROOT / "dist/.wheel-cache"),
        ],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_DEADLINE_SECONDS,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    shutil.copy(artifacts.deb(HOST_ARCH), debs)
    return debs, newer


def test_an_upgrade_updates_the_environment_and_keeps_the_host_enrolled(
    artifacts: Artifacts, packages: tuple[Path, str], tmp_path: Path
) -> None:
    debs, newer = packages
    root = ThrowawayRoot(folder=tmp_path, packages=debs)
    probe = root.run("true")
    if probe.returncode != 0:
        pytest.skip(f"cannot make an overlay root without network here: {probe.stderr.strip()}")
    old_deb = f"/mnt/{artifacts.deb(HOST_ARCH).name}"
    new_deb = old_deb.replace(f"_{artifacts.version}_", f"_{newer}_")
    root.step("install", "dpkg", "--install", old_deb)
    root.step("enable", "systemctl", "enable", "nachtwacht-agent.service", "provibr-agent.service")
    root.step("enroll", "sh", "-c", ENROLLED)
    before = root.changes()

    root.step("upgrade", "dpkg", "--install", new_deb)

    assert root.step("version", "nachtwacht", "--version").stdout == f"nachtwacht {newer}\n"
    installed = root.step("status", "dpkg-query", "--show", "nachtwacht-agent").stdout
    assert installed == f"nachtwacht-agent\t{newer}\n"
    after = root.changes()
    kept = {
        "/etc/systemd/system/multi-user.target.wants/nachtwacht-agent.service",
        "/etc/systemd/system/multi-user.target.wants/provibr-agent.service",
        "/etc/nachtwacht-agent/agent.toml",
        "/var/lib/nachtwacht-agent/state.json",
        "/opt/nachtwacht/current",
    }
    assert kept <= before
    assert kept <= after
    # The new version's build is current, the old one's stays beside it as `previous`.
    current = root.step("current", "readlink", "/opt/nachtwacht/current").stdout
    previous = root.step("previous", "readlink", "/opt/nachtwacht/previous").stdout
    assert (current, previous) == (f"versions/{newer}\n", f"versions/{artifacts.version}\n")
    site = [c for c in after if "/site-packages/nachtwacht_agent-" in c and c.endswith("METADATA")]
    assert sorted(Path(c).parent.name for c in site) == sorted(
        f"nachtwacht_agent-{v}.dist-info" for v in (artifacts.version, newer)
    )
