"""The offline bundle installs with no network: its install.sh, run in a network namespace of its
own (`unshare -n`) into a throwaway root, makes a Python environment from the bundle's wheels
alone, in which `nachtwacht agent` works and the control plane does not exist; the units, users
and install root are in place, and it says what to do next. Its guards refuse, with one line
each, a bundle for another architecture and a Python its wheels do not cover.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_daemon.commands.unit_files import WRITTEN_BY_BUNDLE, written_by_bundle
from tests.packaging.conftest import ARCHES, BUILD_DEADLINE_SECONDS, Artifacts
from tests.worlds.processes import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_DEADLINE_SECONDS + 300)]

HOST_ARCH = platform.machine()
# A customer's root shell: the system's own directories, no setting of this test run.
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def _unshare_network_works() -> bool:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return probe.returncode == 0


needs_this_arch = pytest.mark.skipif(
    HOST_ARCH not in ARCHES, reason=f"no bundle is built for {HOST_ARCH}"
)
needs_no_network = pytest.mark.skipif(
    not _unshare_network_works(), reason="needs root and unshare -n to cut the network"
)


def offline(*command: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["unshare", "-n", *map(str, command)],
        env=CLEAN_ENV,
        # Not the checkout: `python -c` imports from its working directory.
        cwd="/",
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_DEADLINE_SECONDS,
    )


@pytest.fixture(scope="module")
def installed(artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The throwaway root the host architecture's bundle was installed into, and what it said."""
    if HOST_ARCH not in ARCHES or not _unshare_network_works():
        pytest.skip("needs a bundle for this architecture and unshare -n")
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path_factory.mktemp("bundle"))
    root = tmp_path_factory.mktemp("root")
    result = offline("sh", bundle / "install.sh", "--root", root)
    assert result.returncode == 0, result.stderr
    return root, result.stdout


@needs_this_arch
@needs_no_network
def test_the_installed_agent_runs_without_the_control_plane(
    artifacts: Artifacts, installed: tuple[Path, str]
) -> None:
    root, _ = installed
    nachtwacht = root / "usr/local/bin/nachtwacht"
    current = root / "opt/nachtwacht/current"
    assert current.resolve() == root / "opt/nachtwacht/versions" / artifacts.version
    assert (current / ".complete").read_text().strip()
    assert f"exec {current}/venv/bin/python -m nachtwacht" in nachtwacht.read_text()
    agent_help = offline(nachtwacht, "agent", "--help")
    assert agent_help.returncode == 0, agent_help.stderr
    assert agent_help.stdout.startswith("usage: nachtwacht agent")
    control = offline(current / "venv/bin/python", "-c", "import control_plane")
    assert control.returncode == 1
    assert "ModuleNotFoundError: No module named 'control_plane'" in control.stderr
    version = offline(nachtwacht, "--version")
    assert version.stdout == f"nachtwacht {artifacts.version}\n"


@needs_this_arch
@needs_no_network
@pytest.mark.parametrize("command", [("control", "serve"), ("demo",)], ids=["control", "demo"])
def test_what_the_agents_package_leaves_out_is_one_line(
    installed: tuple[Path, str], command: tuple[str, ...]
) -> None:
    root, _ = installed
    result = offline(root / "usr/local/bin/nachtwacht", *command)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"nachtwacht {command[0]}: not part of the agent's package (nachtwacht-agent); "
        "it comes with the full package (the nachtwacht wheel that bin/package builds, "
        "installed with its [control-plane] extra)\n"
    )


@needs_this_arch
@needs_no_network
def test_release_verification_stays_available_without_the_demo(
    installed: tuple[Path, str],
) -> None:
    root, _ = installed
    result = offline(root / "usr/local/bin/nachtwacht", "release", "--help")
    assert result.returncode == 0, result.stderr
    assert "verify" in result.stdout
    assert "build-demo-agent" not in result.stdout


@needs_this_arch
@needs_no_network
def test_the_units_users_and_install_root_are_in_place(installed: tuple[Path, str]) -> None:
    root, _ = installed
    packaging = REPO_ROOT / "packaging"
    placed = {
        "etc/systemd/system/nachtwacht-agent.service": "systemd/nachtwacht-agent.service",
        "etc/systemd/system/provibr-agent.service": "systemd/provibr-agent.service",
        "etc/sysusers.d/nachtwacht-agent.conf": "sysusers.d/nachtwacht-agent.conf",
        "etc/sysusers.d/provibr-agent.conf": "sysusers.d/provibr-agent.conf",
        "etc/tmpfiles.d/nachtwacht-agent.conf": "tmpfiles.d/nachtwacht-agent.conf",
        "etc/polkit-1/rules.d/50-nachtwacht-agent.rules": "polkit/50-nachtwacht-agent.rules",
        "etc/systemd/system/nachtwacht-agent-guard.service": (
            "systemd/nachtwacht-agent-guard.service"
        ),
        "etc/systemd/system/nachtwacht-agent-guard.timer": "systemd/nachtwacht-agent-guard.timer",
        "usr/lib/nachtwacht-agent/guard.sh": "self-update/guard.sh",
    }
    for path, source in placed.items():
        # The units carry the bundle's first line, so that `agent install` enables them as the
        # bundle's rather than keeping them aside as units the administrator wrote.
        mark = WRITTEN_BY_BUNDLE if path.startswith("etc/systemd/") else b""
        assert (root / path).read_bytes() == mark + (packaging / source).read_bytes(), path
        assert written_by_bundle(root / path) == bool(mark), path
    # The non-root drop-in is a choice the admin makes, not the default.
    assert not (root / "etc/systemd/system/nachtwacht-agent.service.d").exists()
    if shutil.which("systemd-sysusers") is None:
        pytest.skip("no systemd-sysusers: install.sh leaves the users to the admin")
    users = {
        line.split(":")[0]: line.split(":")[2]
        for line in (root / "etc/passwd").read_text().splitlines()
    }
    assert {"nachtwacht-agent", "provibr-agent"} <= set(users)
    assert (root / "opt/provibr-agent").stat().st_uid == int(users["nachtwacht-agent"])


@needs_this_arch
@needs_no_network
def test_it_starts_nothing_and_names_the_next_step(installed: tuple[Path, str]) -> None:
    _, said = installed
    assert said.endswith(
        "  nachtwacht agent install --url https://control.example --enrollment-token nwe_... "
        "--trust-root root-1.json\n"
    )
    assert "nothing runs yet" in said


@needs_this_arch
@needs_no_network
def test_running_it_again_keeps_the_environment(
    artifacts: Artifacts, installed: tuple[Path, str], tmp_path: Path
) -> None:
    root, _ = installed
    venv_python = root / "opt/nachtwacht/versions" / artifacts.version / "venv/bin/python"
    before = venv_python.lstat().st_ino
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path)
    again = offline("sh", bundle / "install.sh", "--root", root)
    assert again.returncode == 0, again.stderr
    assert venv_python.lstat().st_ino == before
    assert offline(root / "usr/local/bin/nachtwacht", "agent", "--help").returncode == 0


@needs_this_arch
@needs_no_network
def test_on_an_enrolled_host_it_says_to_restart_not_to_enroll(
    artifacts: Artifacts, installed: tuple[Path, str], tmp_path: Path
) -> None:
    # An upgrade: the host's admin runs a newer bundle's install.sh on an enrolled host.
    root, _ = installed
    config = root / "etc/nachtwacht-agent/agent.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("format_version = 1\n")
    try:
        again = offline("sh", artifacts.unpacked_bundle(HOST_ARCH, tmp_path) / "install.sh",
                        "--root", root)  # fmt: skip
    finally:
        config.unlink()
    assert again.returncode == 0, again.stderr
    assert "this host is enrolled already" in again.stdout
    assert again.stdout.endswith("  systemctl restart nachtwacht-agent\n")
    assert "enrollment-token" not in again.stdout


@needs_this_arch
@needs_no_network
def test_an_install_of_the_layout_before_is_replaced_by_builds_side_by_side(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    own = root / "opt/nachtwacht"
    # The layout before: one environment in /opt/nachtwacht/venv. And a build side by side that
    # `current` named (a host that already switched once), plus one older still.
    (own / "venv/bin").mkdir(parents=True)
    (own / "venv/lib/python3.11/site-packages/nachtwacht_agent-0.0.7.dist-info").mkdir(parents=True)
    for version in ("0.0.8", "0.0.9"):
        (own / "versions" / version / "venv").mkdir(parents=True)
        (own / "versions" / version / ".complete").write_text("sha\n")
    (own / "current").symlink_to("versions/0.0.9")
    pending = root / "var/lib/nachtwacht-agent/self-update/pending"
    pending.parent.mkdir(parents=True)
    pending.write_text("format=1\n")
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path / "bundle")

    done = offline("sh", bundle / "install.sh", "--root", root)

    assert done.returncode == 0, done.stderr
    assert not (own / "venv").exists()
    assert f"replaced {own}/venv" in done.stdout
    assert os.readlink(own / "current") == f"versions/{artifacts.version}"
    assert os.readlink(own / "previous") == "versions/0.0.9"
    assert sorted(p.name for p in (own / "versions").iterdir()) == sorted(
        ["0.0.9", artifacts.version]
    )
    # An install by hand decides: a switch still pending is void.
    assert not pending.exists()
    assert offline(root / "usr/local/bin/nachtwacht", "agent", "--help").returncode == 0


@needs_this_arch
@needs_no_network
def test_a_control_plane_venv_of_the_same_name_is_left_alone(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    root = tmp_path / "root"
    # An operator's control plane (the full `nachtwacht` distribution), not the agent's.
    site = root / "opt/nachtwacht/venv/lib/python3.11/site-packages/nachtwacht-0.0.7.dist-info"
    site.mkdir(parents=True)
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path / "bundle")
    done = offline("sh", bundle / "install.sh", "--root", root)
    assert done.returncode == 0, done.stderr
    assert site.is_dir()
    assert "replaced" not in done.stdout


def _other_arch() -> str:
    return next(arch for arch in ARCHES if arch != HOST_ARCH)


@needs_this_arch
def test_a_bundle_for_another_architecture_is_refused_naming_both(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    other = _other_arch()
    bundle = artifacts.unpacked_bundle(other, tmp_path / "bundle")
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), "--root", str(tmp_path / "root")],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"install.sh: these wheels are for linux-{other}, this machine is {HOST_ARCH} "
        f"(use the bundle for {HOST_ARCH})\n"
    )
    assert not (tmp_path / "root/opt").exists()


@needs_this_arch
def test_a_python_the_wheels_do_not_cover_is_refused_naming_the_covered_ones(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path / "bundle")
    old_python = tmp_path / "python3.10"
    old_python.write_text("#!/bin/sh\necho 3.10\n")
    old_python.chmod(0o755)
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), "--root", str(tmp_path / "root")],
        env={**CLEAN_ENV, "PYTHON": str(old_python)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == (
        f"install.sh: {old_python} is Python 3.10; the wheels here are for 3.11 3.12 3.13 3.14 "
        "(choose one with PYTHON=/usr/bin/python3.X)\n"
    )
    assert not (tmp_path / "root/opt").exists()


@needs_this_arch
def test_an_unknown_argument_is_refused_naming_it(artifacts: Artifacts, tmp_path: Path) -> None:
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path)
    result = subprocess.run(
        ["sh", str(bundle / "install.sh"), "--prefix", "/x"],
        env=CLEAN_ENV,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert result.stderr == (
        "install.sh: unknown argument '--prefix' (expected --root DIR or --venv-only)\n"
    )


@needs_this_arch
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv"
)
def test_installing_into_the_system_as_another_user_is_refused(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    bundle = artifacts.unpacked_bundle(HOST_ARCH, tmp_path)
    # The script on stdin: the unpacked folder is not readable by that user.
    with (bundle / "install.sh").open() as script:
        result = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-s"],
            stdin=script,
            env=CLEAN_ENV,
            cwd="/",
            capture_output=True,
            text=True,
            check=False,
        )
    assert result.returncode == 1
    assert result.stderr == (
        "install.sh: run it as root (it installs into /opt, /etc and /usr/local), "
        "or try it with --root DIR\n"
    )
