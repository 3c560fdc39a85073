"""The root unit lets the updater run the managed build's code as `agent_user`.

The build's self-test and health command run as the managed agent's own user, never as root
(`run_bounded(..., user=...)`). Under the unit that takes three things from the updater: changing
its user and groups (CAP_SETUID, CAP_SETGID) and, when a command outlives its deadline, killing a
process group that now belongs to another user (CAP_KILL). The unit's capability bounding set is
reproduced here with `setpriv`, the updater's own code runs under it, and both happen for real:
a command as another user, and one killed at its deadline. systemd's system-call filter, the other
thing that could refuse them, is read from systemd itself.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.agent_daemon.service_units.test_systemd_units import UNITS, directives
from tests.worlds.processes import REPO_ROOT

UNIT = UNITS / "nachtwacht-agent.service"
# A user every Debian host has, standing in for the managed agent's own.
OTHER_USER = "nobody"

# Runs as the updater would under the unit: a command as OTHER_USER, then one that outlives its
# deadline as OTHER_USER. Prints the first one's uid and what the second one's deadline did.
_UPDATER_AS_ROOT = textwrap.dedent(
    """
    import sys
    from agent_daemon.updater.build_command import CommandFailed, run_bounded

    user = sys.argv[1]
    result = run_bounded(["id", "-u"], timeout=120, user=user)
    print("ran as", result.returncode, result.stdout.strip(), repr(result.stderr))
    try:
        run_bounded(["sleep", "30"], timeout=1, user=user)
    except CommandFailed as exc:
        print("deadline:", exc)
    """
)


def bounding_set() -> list[str]:
    (value,) = directives(UNIT)["CapabilityBoundingSet"]
    return value.split()


def test_the_updater_keeps_only_the_capabilities_it_uses() -> None:
    # Unpacking builds (file ownership and modes), becoming the managed agent's user to run its
    # code, and ending that code at its deadline; nothing else.
    assert sorted(bounding_set()) == [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_FOWNER",
        "CAP_FSETID",
        "CAP_KILL",
        "CAP_SETGID",
        "CAP_SETUID",
    ]


def _setpriv_works() -> bool:
    if shutil.which("setpriv") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(
        ["setpriv", "--bounding-set", "-all", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.mark.skipif(
    not _setpriv_works(), reason="needs root and setpriv allowed to shrink the bounding set"
)
def test_under_the_units_capabilities_the_build_runs_as_its_own_user_and_is_killed_at_its_deadline(
    tmp_path: Path,
) -> None:
    other = pwd.getpwnam(OTHER_USER)
    keep = ",".join("+" + name.removeprefix("CAP_").lower() for name in bounding_set())
    script = tmp_path / "updater_as_root.py"
    script.write_text(_UPDATER_AS_ROOT)
    result = subprocess.run(
        ["setpriv", "--bounding-set", f"-all,{keep}", sys.executable, str(script), OTHER_USER],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ran as 0 {other.pw_uid} ''"
    assert lines[1].startswith("deadline: 'sleep 30' did not finish within 1 s")


def _system_calls(group: str) -> set[str]:
    listed = subprocess.run(
        ["systemd-analyze", "syscall-filter", group],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    calls: set[str] = set()
    for line in listed[1:]:
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        calls |= _system_calls(name) if name.startswith("@") else {name}
    return calls


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_the_units_system_call_filter_allows_changing_user_and_killing() -> None:
    (value,) = directives(UNIT)["SystemCallFilter"]
    allowed: set[str] = set()
    for group in value.split():
        allowed |= _system_calls(group)
    assert {"setresuid", "setresgid", "setgroups", "kill"} <= allowed
