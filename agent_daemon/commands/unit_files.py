"""The systemd units on a host: which ones a package installed, which ones `install` wrote, and
`systemctl` run on them.

The unit texts ship with the agent (`agent_daemon/host/units/`, the files of `packaging/systemd/`
copied into the wheel). `install` writes a unit to the administrator's unit directory only when
no package installed it and the administrator has none of that name: a unit it wrote starts with
`WRITTEN_BY_INSTALL`, which is how `uninstall` knows it may remove it — never a package's file
(the package manager removes those), never the administrator's own. The offline bundle's
`install.sh` puts its units in the administrator's directory too, each starting with
`WRITTEN_BY_BUNDLE`: they are used as a package's are (enabled, never rewritten nor removed),
not kept aside as the administrator's own.

`systemctl` is resolved on PATH when it runs.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from agent_daemon.disk.atomic_file import write_bytes_atomically

__all__ = [
    "ADMIN_UNIT_DIR",
    "DAEMON_UNIT",
    "MANAGED_AGENT_UNIT",
    "PACKAGE_NAME",
    "PACKAGE_UNIT_DIRS",
    "UNIT_NAMES",
    "WRITTEN_BY_BUNDLE",
    "WRITTEN_BY_INSTALL",
    "SystemctlFailed",
    "UnitPlacement",
    "managed_agent_user",
    "package_unit",
    "place_units",
    "run_systemctl",
    "shipped_unit",
    "systemctl_succeeds",
    "written_by_bundle",
    "written_by_install",
]

ADMIN_UNIT_DIR = Path("/etc/systemd/system")
# Where a distribution's package puts its units (Debian's and the merged-/usr layout's).
PACKAGE_UNIT_DIRS = (Path("/lib/systemd/system"), Path("/usr/lib/systemd/system"))
PACKAGE_NAME = "nachtwacht-agent"
DAEMON_UNIT = "nachtwacht-agent.service"
MANAGED_AGENT_UNIT = "provibr-agent.service"
UNIT_NAMES = (DAEMON_UNIT, MANAGED_AGENT_UNIT)
WRITTEN_BY_INSTALL = (
    b"# Written by `nachtwacht agent install`; `nachtwacht agent uninstall` removes it.\n"
)
# The first line of each unit the offline bundle's install.sh installs (packaging/bundle/install.sh
# writes this very line).
WRITTEN_BY_BUNDLE = (
    b"# Installed by the nachtwacht-agent bundle's install.sh; a newer bundle's install.sh "
    b"replaces it.\n"
)
# A systemctl call that hangs (a stuck D-Bus) must not hang the command.
SYSTEMCTL_TIMEOUT_SECONDS = 120.0


class SystemctlFailed(Exception):
    """`systemctl` is not on PATH, did not finish, or exited non-zero; the message says which."""


@dataclass(frozen=True, kw_only=True)
class UnitPlacement:
    written: list[Path] = field(default_factory=list)
    by_package: list[Path] = field(default_factory=list)
    # The offline bundle's, in the administrator's directory: used as a package's.
    by_bundle: list[Path] = field(default_factory=list)
    # The administrator's own unit of that name: left as it is.
    kept: list[Path] = field(default_factory=list)

    def ours(self, name: str) -> bool:
        """The unit is `install`'s, the package's or the bundle's, so `install` may enable it."""
        return any(path.name == name for path in (*self.written, *self.by_package, *self.by_bundle))


def shipped_unit(name: str) -> bytes:
    return resources.files("agent_daemon.host").joinpath("units", name).read_bytes()


def package_unit(name: str, package_dirs: Sequence[Path] = PACKAGE_UNIT_DIRS) -> Path | None:
    for folder in package_dirs:
        if (folder / name).exists():
            return folder / name
    return None


def managed_agent_user(
    target_dir: Path, *, package_dirs: Sequence[Path] = PACKAGE_UNIT_DIRS
) -> str | None:
    """The `User=` of the managed agent's unit in effect — the package's, else the one in
    `target_dir`, else the shipped one — or None when it names none (root, or `DynamicUser=`)."""
    path = package_unit(MANAGED_AGENT_UNIT, package_dirs) or target_dir / MANAGED_AGENT_UNIT
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = shipped_unit(MANAGED_AGENT_UNIT).decode("utf-8", errors="replace")
    users = re.findall(r"^\s*User\s*=\s*(\S+)\s*$", text, flags=re.MULTILINE)
    # The last assignment wins, as in systemd; root needs no dropping to.
    return users[-1] if users and users[-1] not in {"root", "0"} else None


def written_by_install(path: Path) -> bool:
    return _first_line(path) == WRITTEN_BY_INSTALL


def written_by_bundle(path: Path) -> bool:
    return _first_line(path) == WRITTEN_BY_BUNDLE


def _first_line(path: Path) -> bytes | None:
    try:
        with path.open("rb") as unit:
            return unit.readline()
    except OSError:
        return None


def place_units(
    target_dir: Path, *, package_dirs: Sequence[Path] = PACKAGE_UNIT_DIRS
) -> UnitPlacement:
    """Each shipped unit written to `target_dir` unless a package or the offline bundle installed
    it or the administrator has one of that name; a unit `install` wrote before is brought up to
    date."""
    placement = UnitPlacement()
    for name in UNIT_NAMES:
        packaged = package_unit(name, package_dirs)
        target = target_dir / name
        if packaged is not None:
            placement.by_package.append(packaged)
        elif written_by_bundle(target):
            placement.by_bundle.append(target)
        elif target.exists() and not written_by_install(target):
            placement.kept.append(target)
        else:
            write_bytes_atomically(target, WRITTEN_BY_INSTALL + shipped_unit(name), mode=0o644)
            placement.written.append(target)
    return placement


def run_systemctl(*args: str) -> None:
    command = shutil.which("systemctl")
    if command is None:
        raise SystemctlFailed("systemctl: not found on PATH (is this host run by systemd?)")
    try:
        result = subprocess.run(
            [command, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=SYSTEMCTL_TIMEOUT_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SystemctlFailed(
            f"systemctl {' '.join(args)}: no answer within {SYSTEMCTL_TIMEOUT_SECONDS:g} s"
        ) from exc
    except OSError as exc:
        raise SystemctlFailed(f"systemctl {' '.join(args)}: cannot run ({exc})") from exc
    if result.returncode != 0:
        said = (result.stderr.strip() or result.stdout.strip()).splitlines()
        raise SystemctlFailed(
            f"systemctl {' '.join(args)}: exit status {result.returncode}"
            + (f" ({said[-1]})" if said else "")
        )


def systemctl_succeeds(*args: str) -> bool:
    """`systemctl ARGS` exits 0 (`is-enabled`, `is-active`); False without systemctl too."""
    try:
        run_systemctl(*args)
    except SystemctlFailed:
        return False
    return True
