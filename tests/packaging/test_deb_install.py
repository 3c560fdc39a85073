"""The agent's .deb on a real Debian system with no network: installed, used, removed, purged.

The root is a throwaway overlay of this machine's system (`throwaway_root`): dpkg checks the
package's dependencies against a real package database and runs its maintainer scripts as root in
a real system — systemd-sysusers, systemd-tmpfiles, `systemctl disable`, the Python environment
made from the shipped wheels — and every change they make is visible, which is how "nothing is
left" is checked. (Into an empty folder, `dpkg --root` would need the dependencies forced and the
scripts run outside it: less of what a customer's host does.)

Between installing and removing, the host is used as an enrolled one would be: both units
enabled, a configuration, the updater's state and an installed build.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.packaging.conftest import BUILD_DEADLINE_SECONDS, Artifacts
from tests.packaging.throwaway_root import HOST_ARCH, ThrowawayRoot, why_not_here
from tests.worlds.processes import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_DEADLINE_SECONDS + 600)]

# What removing the package keeps and purging takes.
PURGED = ("/etc/nachtwacht-agent", "/var/lib/nachtwacht-agent", "/opt/provibr-agent")
# What stays after a purge, by Debian's rules: the system users (files may still carry their
# ids) and dpkg's own records.
USER_DATABASE = {
    f"/etc/{name}{suffix}"
    for name in ("passwd", "group", "shadow", "gshadow")
    for suffix in ("", "-")
} | {"/etc/.pwd.lock"}
DPKG_RECORDS = ("/var/lib/dpkg/", "/var/log/dpkg.log")
USED_HOST = (
    "mkdir -p /etc/nachtwacht-agent /var/lib/nachtwacht-agent/updater "
    "/opt/provibr-agent/versions/1.0.0/bin && "
    "echo 'url = \"https://control.example\"' > /etc/nachtwacht-agent/agent.toml && "
    "echo '{}' > /var/lib/nachtwacht-agent/updater/state.json && "
    "ln -s versions/1.0.0 /opt/provibr-agent/current"
)


def _not_bookkeeping(changes: set[str]) -> set[str]:
    return {c for c in changes if c not in USER_DATABASE and not c.startswith(DPKG_RECORDS)}


@dataclass(frozen=True)
class Lifecycle:
    root: ThrowawayRoot
    deb: str
    after_install: set[str]
    after_remove: set[str]
    after_purge: set[str]


@pytest.fixture(scope="module")
def lifecycle(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Lifecycle:
    why_not = why_not_here()
    if why_not is not None:
        pytest.skip(why_not)
    root = ThrowawayRoot(folder=tmp_path_factory.mktemp("deb-root"), packages=artifacts.folder)
    probe = root.run("true")
    if probe.returncode != 0:
        pytest.skip(f"cannot make an overlay root without network here: {probe.stderr.strip()}")
    deb = f"/mnt/{artifacts.deb(HOST_ARCH).name}"
    root.step("install", "dpkg", "--install", deb)
    root.step("reinstall", "dpkg", "--install", deb)
    root.step("agent help", "nachtwacht", "agent", "--help")
    root.said["import control_plane"] = root.run(
        "/opt/nachtwacht/current/venv/bin/python", "-c", "import control_plane"
    )
    root.step("users", "getent", "passwd", "nachtwacht-agent", "provibr-agent")
    root.step("install root", "stat", "--format=%U %a", "/opt/provibr-agent")
    root.step("unit", "cat", "/lib/systemd/system/nachtwacht-agent.service")
    after_install = root.changes()
    # Used as an enrolled host: what `nachtwacht agent install` and the updater leave.
    root.step("enable", "systemctl", "enable", "nachtwacht-agent.service", "provibr-agent.service")
    root.step("use", "sh", "-c", USED_HOST)
    root.step("remove", "dpkg", "--remove", "nachtwacht-agent")
    after_remove = root.changes()
    root.step("purge", "dpkg", "--purge", "nachtwacht-agent")
    after_purge = root.changes()
    return Lifecycle(
        root=root,
        deb=deb,
        after_install=after_install,
        after_remove=after_remove,
        after_purge=after_purge,
    )


def test_installing_makes_the_environment_offline_and_starts_nothing(lifecycle: Lifecycle) -> None:
    said = lifecycle.root.said["install"].stdout
    assert "nothing runs yet" in said
    assert said.rstrip().endswith(
        "nachtwacht agent install --url https://control.example --enrollment-token nwe_... "
        "--trust-root root-1.json"
    )
    assert lifecycle.root.said["agent help"].stdout.startswith("usage: nachtwacht agent")
    missing = lifecycle.root.said["import control_plane"]
    assert missing.returncode == 1
    assert "No module named 'control_plane'" in missing.stderr
    # No unit is enabled before the host is enrolled, no configuration made up.
    assert not any(".wants/" in c for c in lifecycle.after_install)
    assert not any(c.startswith("/etc/nachtwacht-agent") for c in lifecycle.after_install)
    assert "/opt/nachtwacht/current" in lifecycle.after_install
    assert "/usr/lib/nachtwacht-agent/guard.sh" in lifecycle.after_install


def test_the_units_users_and_install_root_are_in_place(lifecycle: Lifecycle) -> None:
    said = lifecycle.root.said
    unit = REPO_ROOT / "packaging/systemd/nachtwacht-agent.service"
    assert said["unit"].stdout == unit.read_text()
    users = [line.split(":")[0] for line in said["users"].stdout.splitlines()]
    assert users == ["nachtwacht-agent", "provibr-agent"]
    assert said["install root"].stdout == "nachtwacht-agent 755\n"


def test_removing_keeps_only_what_purging_takes(lifecycle: Lifecycle) -> None:
    left = _not_bookkeeping(lifecycle.after_remove)
    assert {c for c in left if not c.startswith(PURGED)} == set()
    # The configuration and the state survive a remove, as Debian keeps configuration.
    assert "/etc/nachtwacht-agent/agent.toml" in left
    assert "/var/lib/nachtwacht-agent/updater/state.json" in left
    # The environment, the command and the enablement are gone with the program.
    assert not any(c.startswith(("/opt/nachtwacht", "/usr/bin/nachtwacht")) for c in left)
    assert not any("multi-user.target.wants" in c for c in left)


def test_purging_leaves_nothing_but_the_users_and_dpkgs_records(lifecycle: Lifecycle) -> None:
    assert _not_bookkeeping(lifecycle.after_purge) == set()
    assert lifecycle.after_purge & USER_DATABASE
    status = lifecycle.root.run("dpkg-query", "--show", "nachtwacht-agent")
    assert status.returncode == 1
