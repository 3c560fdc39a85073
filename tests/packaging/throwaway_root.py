"""A throwaway Debian root with no network, to install the agent's .deb into for real.

This machine's own system seen through an overlay whose writes land in a temporary folder, entered
with chroot inside `unshare -m -n` (a mount namespace for the overlay, no network at all). dpkg
checks a package's dependencies against a real package database and runs its maintainer scripts
as root in a real system, and every change they make is a file in the overlay's upper folder
(`changes()`). Each command is a namespace of its own; the upper folder carries the state from
one to the next. A folder of packages is at /mnt.
"""

from __future__ import annotations

import os
import platform
import shutil
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from tests.packaging.conftest import ARCHES, BUILD_DEADLINE_SECONDS

HOST_ARCH = platform.machine()
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
DEPENDENCIES = ("python3", "python3-venv", "systemd")

# Mounts the overlay (lower: this machine's /), /dev, /proc and the packages, then runs the
# command chrooted there; the namespace, and with it every mount, ends with the command.
_ENTER = """
set -e
merged=$1 upper=$2 work=$3 packages=$4
shift 4
mount -t overlay overlay -o "lowerdir=/,upperdir=$upper,workdir=$work" "$merged"
mount --bind /dev "$merged/dev"
mount -t proc proc "$merged/proc"
mount --bind "$packages" "$merged/mnt"
exec chroot "$merged" "$@"
"""


@dataclass
class ThrowawayRoot:
    folder: Path
    packages: Path
    said: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)

    def run(self, *command: str) -> subprocess.CompletedProcess[str]:
        parts = [self.folder / name for name in ("merged", "upper", "work")]
        for part in parts:
            part.mkdir(exist_ok=True)
        enter = ["unshare", "-m", "-n", "sh", "-c", _ENTER, "enter", *map(str, parts)]
        return subprocess.run(
            [*enter, str(self.packages), *command],
            env=CLEAN_ENV,
            capture_output=True,
            text=True,
            check=False,
            timeout=BUILD_DEADLINE_SECONDS,
        )

    def step(self, name: str, *command: str) -> subprocess.CompletedProcess[str]:
        result = self.run(*command)
        assert result.returncode == 0, f"{name}: {result.stdout}\n{result.stderr}"
        self.said[name] = result
        return result

    def changes(self) -> set[str]:
        """Every path the root's system has that this machine's has not, or has otherwise."""
        upper = self.folder / "upper"
        found: set[str] = set()
        for folder, folders, files in os.walk(upper):
            for name in folders + files:
                path = Path(folder, name)
                seen = "/" + str(path.relative_to(upper))
                mode = path.lstat().st_mode
                if stat.S_ISCHR(mode) and path.lstat().st_rdev == 0:
                    found.add(f"{seen} (deleted)")
                elif not stat.S_ISDIR(mode) or not os.path.isdir(seen):
                    found.add(seen)
        return found


def why_not_here() -> str | None:
    """Why no throwaway root can be made on this machine, or None."""
    if HOST_ARCH not in ARCHES:
        return f"no .deb is built for {HOST_ARCH}"
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("dpkg") is None:
        return "needs root, unshare and dpkg (a Debian host)"
    status = subprocess.run(
        ["dpkg-query", "--show", "--showformat=${Status}\n", *DEPENDENCIES],
        capture_output=True,
        text=True,
        check=False,
    )
    if status.stdout.count("ok installed") != len(DEPENDENCIES):
        return f"this host lacks some of the package's dependencies {DEPENDENCIES}"
    return None
