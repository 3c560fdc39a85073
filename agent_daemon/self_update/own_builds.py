"""The updater's own install root: builds made from the offline bundle's wheels, side by side.

A build is a venv in `versions/<v>/venv` holding the `nachtwacht-agent` wheel of version `<v>` and
its dependencies, installed with `pip install --no-index` from the wheels shipped beside it, never
from an index. It is made in `versions/.<v>.tmp/`, renamed into place, and `.complete` (the agent
wheel's sha256) is written last, exactly as the managed agent's builds are (`updater.install`).

One install or switch at a time (`own_builds_lock`, a lock in `versions/`): the daemon's at a slot
and an admin's `agent self-update install | switch` may otherwise meet — one removing the other's
half-made build, or a build the other is switching to, and `current` left naming nothing.

A venv's console scripts name the interpreter by the path the venv was made at, which the rename
changes; so everything runs a build as `<build>/venv/bin/python -m nachtwacht`, never through
`venv/bin/nachtwacht`. The interpreter link and `pyvenv.cfg` do not depend on the folder's name.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agent_daemon.disk.atomic_file import fsync_directory
from agent_daemon.disk.pid_lock import LockHeld, PidLock
from agent_daemon.errors import SelfUpdateError, UpdateInProgress
from agent_daemon.updater.layout import InstallLayout
from signed_release.versions import is_valid_version

__all__ = [
    "AGENT_WHEEL_PREFIX",
    "DEFAULT_OWN_ROOT",
    "INSTALL_TIMEOUT_SECONDS",
    "NOT_AN_OWN_BUILD",
    "OWN_BUILDS_LOCK_NAME",
    "RunningBuild",
    "build_python",
    "install_build",
    "own_builds_lock",
    "running_build",
    "self_update_off_reason",
]

DEFAULT_OWN_ROOT = Path("/opt/nachtwacht")
AGENT_WHEEL_PREFIX = "nachtwacht_agent-"
# A venv and a few dozen local wheels: seconds on a host, minutes on a slow disk.
INSTALL_TIMEOUT_SECONDS = 600.0
# Why a daemon does not update itself: said by its start line and by `agent status`.
NOT_AN_OWN_BUILD = (
    "not installed as one of the updater's own builds (<own root>/versions/<version>/venv): "
    "nachtwacht's own agent is updated by reinstalling it"
)

# In `versions/`: hidden, and no version's name nor a staging folder's (`.<version>.tmp`).
OWN_BUILDS_LOCK_NAME = ".builds.lock"


@contextmanager
def own_builds_lock(own_root: Path) -> Iterator[None]:
    """One install or switch of the updater's builds at a time, across processes: another one
    under way is refused at once (`UpdateInProgress`: a run it stops may pass, tried again inside
    its window, as with the managed agent's update lock), never waited for."""
    layout = InstallLayout(own_root)
    layout.ensure()
    lock = PidLock(layout.versions / OWN_BUILDS_LOCK_NAME)
    try:
        lock.acquire()
    except LockHeld as exc:
        raise UpdateInProgress(
            f"another install or switch of the updater's builds is under way (lock {exc.path} "
            f"held by pid {exc.pid or 'unknown'}); one at a time — try again once it has ended"
        ) from exc
    try:
        yield
    finally:
        lock.release()


@dataclass(frozen=True, kw_only=True)
class RunningBuild:
    """The build this process was started from: `<own_root>/versions/<version>/venv`."""

    own_root: Path
    version: str


def self_update_off_reason(running: RunningBuild | None) -> str | None:
    """Why this build cannot install the next one (None: it can): it is not one of the own
    builds, or their folder is not writable by this process (the non-root mode: the package
    manager owns /opt/nachtwacht there)."""
    if running is None:
        return NOT_AN_OWN_BUILD
    versions = InstallLayout(running.own_root).versions
    if not os.access(versions, os.W_OK | os.X_OK):
        return (
            f"{versions} is not writable by this user: nachtwacht's own agent is updated by "
            "reinstalling it"
        )
    return None


def build_python(own_root: Path, version: str) -> Path:
    return InstallLayout(own_root).version_dir(version) / "venv" / "bin" / "python"


def running_build(prefix: str | None = None) -> RunningBuild | None:
    """The build `prefix` (default: this interpreter's venv) belongs to; None for any other
    installation (a development checkout, the old single `/opt/nachtwacht/venv`).

    Read once at start: the venv is reached through `current`, which a later switch moves."""
    venv = Path(prefix if prefix is not None else sys.prefix).resolve()
    version_dir = venv.parent
    if venv.name != "venv" or version_dir.parent.name != "versions":
        return None
    if not is_valid_version(version_dir.name):
        return None
    return RunningBuild(own_root=version_dir.parent.parent, version=version_dir.name)


def install_build(
    *,
    own_root: Path,
    wheels: Path,
    version: str,
    python: str = "python3",
    timeout_seconds: float = INSTALL_TIMEOUT_SECONDS,
) -> Path:
    """`versions/<version>/` made from the wheels in `wheels` (nothing else is read); returns the
    build's folder. A build already complete is left as it is. Once it is made, builds other
    than it, `current` and `previous` are removed past the layout's limit, oldest first."""
    layout = InstallLayout(own_root)
    final = layout.version_dir(version)
    if layout.complete_sha256(version) is not None:
        return final
    wheel = _agent_wheel(wheels, version)
    with own_builds_lock(own_root):
        return _install_locked(layout, wheels, wheel, version, python, timeout_seconds)


def _install_locked(
    layout: InstallLayout,
    wheels: Path,
    wheel: Path,
    version: str,
    python: str,
    timeout_seconds: float,
) -> Path:
    final = layout.version_dir(version)
    if layout.complete_sha256(version) is not None:
        return final  # made by the install that held the lock before
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    staging = layout.staging_dir(version)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        _make_venv(staging, wheels, wheel, python=python, timeout_seconds=timeout_seconds)
    except BaseException:
        # A half-made venv (tens of MB) would hold a disk that filled until the next attempt.
        shutil.rmtree(staging, ignore_errors=True)
        raise
    # A folder without `.complete` is a torn install from an earlier attempt: replaced.
    shutil.rmtree(final, ignore_errors=True)
    layout.complete(staging, version, sha256)
    # A self-update installs one build a release: keep the new one, `current` and `previous`
    # (what the guard goes back to) and remove older ones, so the own root does not grow.
    layout.apply_retention([version], bad=[])
    return final


def _make_venv(
    staging: Path, wheels: Path, wheel: Path, *, python: str, timeout_seconds: float
) -> None:
    staging.mkdir()
    venv = staging / "venv"
    _run([python, "-m", "venv", str(venv)], what=f"{python} -m venv", timeout=timeout_seconds)
    _run(
        [
            str(venv / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-index",
            "--no-cache-dir",
            "--disable-pip-version-check",
            "--find-links",
            str(wheels),
            str(wheel),
        ],
        what=f"pip install of {wheel.name} from {wheels}",
        timeout=timeout_seconds,
    )
    fsync_directory(staging)


def _agent_wheel(wheels: Path, version: str) -> Path:
    found = sorted(wheels.glob(f"{AGENT_WHEEL_PREFIX}{version}-*.whl"))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise SelfUpdateError(
            f"wheels: expected one {AGENT_WHEEL_PREFIX}{version}-*.whl in {wheels}, found {names}"
        )
    return found[0]


def _run(command: list[str], *, what: str, timeout: float) -> None:
    # Only the shipped wheels: no pip settings of this host, no index, no user site.
    env = {
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
        "PIP_CONFIG_FILE": os.devnull,
        "PYTHONNOUSERSITE": "1",
    }
    try:
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SelfUpdateError(f"{what}: could not run ({exc})") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SelfUpdateError(f"{what}: exit status {done.returncode}: {' / '.join(tail)}")
