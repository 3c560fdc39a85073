"""What `bin/package` builds: two wheels, and for each architecture an offline bundle and a .deb.

The agent's artifacts hold no control plane and no demo (the agent's own module that talks to
the control plane, `agent_daemon/connection/control_plane_client.py`, is of course there); every
dependency is a registry wheel for the bundle's architecture, one compiled wheel per covered
Python; the units are the ones in packaging/; and a rerun with the wheel cache needs no network.
"""

from __future__ import annotations

import email.parser
import io
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.packaging.conftest import ARCHES, BUILD_DEADLINE_SECONDS, Artifacts
from tests.worlds.processes import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(BUILD_DEADLINE_SECONDS + 300)]

PYTHONS = ("cp311", "cp312", "cp313", "cp314")
# Top-level folders of a wheel that the agent's package must not hold.
NOT_THE_AGENTS = ("control_plane/", "nachtwacht/demo")
UNIT_FILES = {
    "systemd/nachtwacht-agent.service": "systemd/nachtwacht-agent.service",
    "systemd/provibr-agent.service": "systemd/provibr-agent.service",
    "systemd/nachtwacht-agent.service.d/non-root.conf": (
        "systemd/nachtwacht-agent.service.d/non-root.conf"
    ),
    "sysusers.d/nachtwacht-agent.conf": "sysusers.d/nachtwacht-agent.conf",
    "sysusers.d/provibr-agent.conf": "sysusers.d/provibr-agent.conf",
    "tmpfiles.d/nachtwacht-agent.conf": "tmpfiles.d/nachtwacht-agent.conf",
    "polkit/50-nachtwacht-agent.rules": "polkit/50-nachtwacht-agent.rules",
}


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = (n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return email.parser.Parser().parsestr(wheel.read(name).decode())


def _agents_part(names: list[str]) -> list[str]:
    return [name for name in names if name.startswith(NOT_THE_AGENTS)]


def _wheels_in_bundle(artifacts: Artifacts, arch: str) -> dict[str, bytes]:
    with tarfile.open(artifacts.bundle(arch)) as archive:
        return {
            Path(member.name).name: archive.extractfile(member).read()  # type: ignore[union-attr]  # a regular file
            for member in archive.getmembers()
            if member.isfile() and member.name.endswith(".whl")
        }


def test_the_full_wheel_holds_the_control_plane_and_the_demo(artifacts: Artifacts) -> None:
    with zipfile.ZipFile(artifacts.full_wheel) as wheel:
        names = wheel.namelist()
        assert "control_plane/__init__.py" in names
        assert "nachtwacht/demo.py" in names
        assert _metadata(wheel)["Name"] == "nachtwacht"


def test_the_agent_wheel_holds_the_agent_and_no_control_plane_or_demo(
    artifacts: Artifacts,
) -> None:
    with zipfile.ZipFile(artifacts.agent_wheel) as wheel:
        names = wheel.namelist()
        metadata = _metadata(wheel)
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "nachtwacht = nachtwacht.cli:main" in wheel.read(entry_points).decode()
    assert _agents_part(names) == []
    for package in ("ground", "shared_planner", "agent_daemon", "signed_release", "nachtwacht"):
        assert f"{package}/__init__.py" in names
    assert "agent_daemon/connection/control_plane_client.py" in names
    assert metadata["Name"] == "nachtwacht-agent"
    assert metadata["Version"] == artifacts.version


def test_the_agent_wheel_requires_what_the_agent_extra_requires(artifacts: Artifacts) -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    expected = [*project["dependencies"], *project["optional-dependencies"]["agent"]]
    with zipfile.ZipFile(artifacts.agent_wheel) as wheel:
        required = _metadata(wheel).get_all("Requires-Dist")
    assert [Requirement(r) for r in required or []] == [Requirement(e) for e in expected]


@pytest.mark.parametrize("arch", list(ARCHES))
def test_a_bundle_holds_the_agent_and_its_dependencies_for_its_architecture_only(
    artifacts: Artifacts, arch: str
) -> None:
    wheels = _wheels_in_bundle(artifacts, arch)
    assert artifacts.agent_wheel.name in wheels
    assert artifacts.full_wheel.name not in wheels
    for name, data in wheels.items():
        assert _agents_part(zipfile.ZipFile(io.BytesIO(data)).namelist()) == [], name
        tags = name.removesuffix(".whl").split("-")[-1]
        assert tags == "any" or tags.endswith(f"_{arch}"), name
    # The compiled dependencies, once for every covered Python (cryptography's one wheel, abi3,
    # serves them all).
    for python in PYTHONS:
        assert any(n.startswith("pydantic_core-") and f"-{python}-" in n for n in wheels), python
    assert any(n.startswith("cryptography-") and "-abi3-" in n for n in wheels)


@pytest.mark.parametrize("arch", list(ARCHES))
def test_a_bundle_holds_the_units_and_an_install_script_for_its_version_and_architecture(
    artifacts: Artifacts, arch: str, tmp_path: Path
) -> None:
    bundle = artifacts.unpacked_bundle(arch, tmp_path)
    for shipped, source in UNIT_FILES.items():
        assert (bundle / "units" / shipped).read_bytes() == (
            REPO_ROOT / "packaging" / source
        ).read_bytes()
    script = (bundle / "install.sh").read_text()
    assert "@" not in script.replace("$@", "")
    assert f"VERSION={artifacts.version}\nARCH={arch}\n" in script
    assert (bundle / "install.sh").stat().st_mode & 0o111


def _deb_field(deb: Path, field: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "--field", str(deb), field], capture_output=True, text=True, check=True
    ).stdout.strip()


def _deb_entries(deb: Path) -> dict[str, str]:
    """Each path the package installs → what it is ('-' file, 'd' folder, 'l' link + target)."""
    listing = subprocess.run(
        ["dpkg-deb", "--contents", str(deb)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    entries = {}
    for line in listing:
        mode, owner, _size, _day, _time, path = line.split(maxsplit=5)
        assert owner == "root/root", line
        path = path.removeprefix(".")
        if mode.startswith("l"):
            path, _, target = path.partition(" -> ")
            entries[path] = f"l {target}"
        else:
            entries[path.rstrip("/") or "/"] = mode[0]
    return entries


@pytest.mark.parametrize("arch", list(ARCHES))
def test_a_deb_places_the_units_and_ships_the_bundles_wheels(
    artifacts: Artifacts, arch: str
) -> None:
    deb = artifacts.deb(arch)
    assert _deb_field(deb, "Package") == "nachtwacht-agent"
    assert _deb_field(deb, "Version") == artifacts.version
    assert _deb_field(deb, "Architecture") == ARCHES[arch]
    assert _deb_field(deb, "Depends") == (
        "python3 (>= 3.11), python3 (<< 3.15), python3-venv, systemd"
    )
    entries = _deb_entries(deb)
    placed = {
        "/lib/systemd/system/nachtwacht-agent.service": "systemd/nachtwacht-agent.service",
        "/lib/systemd/system/provibr-agent.service": "systemd/provibr-agent.service",
        "/usr/lib/sysusers.d/nachtwacht-agent.conf": "sysusers.d/nachtwacht-agent.conf",
        "/usr/lib/sysusers.d/provibr-agent.conf": "sysusers.d/provibr-agent.conf",
        "/usr/lib/tmpfiles.d/nachtwacht-agent.conf": "tmpfiles.d/nachtwacht-agent.conf",
        "/usr/share/polkit-1/rules.d/50-nachtwacht-agent.rules": "polkit/50-nachtwacht-agent.rules",
        "/lib/systemd/system/nachtwacht-agent-guard.service": "",
        "/lib/systemd/system/nachtwacht-agent-guard.timer": "",
        "/usr/lib/nachtwacht-agent/guard.sh": "",
    }
    for path in placed:
        assert entries.get(path) == "-", path
    # A script through `current`, not a link to a venv's console script.
    assert entries["/usr/bin/nachtwacht"] == "-"
    assert entries["/usr/share/nachtwacht-agent/install.sh"] == "-"
    shipped = {
        Path(path).name
        for path in entries
        if path.startswith("/usr/share/nachtwacht-agent/wheels/") and path.endswith(".whl")
    }
    assert shipped == set(_wheels_in_bundle(artifacts, arch))
    # Nothing under /etc, /var or /opt belongs to the package: what is made there is made by its
    # scripts and removed by them.
    assert [p for p in entries if p.startswith(("/etc", "/var", "/opt"))] == []


def _unshare_network_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.mark.skipif(not _unshare_network_works(), reason="needs unshare -n (root, namespaces)")
def test_a_rebuild_with_the_wheel_cache_needs_no_network(
    artifacts: Artifacts, tmp_path: Path
) -> None:
    # The session's build filled the cache (downloading when it had to); this one has no network.
    result = subprocess.run(
        ["unshare", "-n", str(REPO_ROOT / "bin" / "package"), "--out", str(tmp_path)],
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        check=False,
        timeout=BUILD_DEADLINE_SECONDS,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(p.name for p in artifacts.folder.iterdir())
    for arch in ARCHES:
        with tarfile.open(tmp_path / artifacts.bundle(arch).name) as again:
            names = sorted(Path(n).name for n in again.getnames() if n.endswith(".whl"))
        assert names == sorted(_wheels_in_bundle(artifacts, arch))


UNITS_DATA = REPO_ROOT / "agent_daemon" / "host" / "units"


@pytest.mark.skipif(not UNITS_DATA.is_dir(), reason="no agent_daemon/host/units in this checkout")
def test_the_agent_wheel_holds_the_units_as_files_for_agent_install(artifacts: Artifacts) -> None:
    # They are links into packaging/ in the checkout; the wheel must hold their content.
    shipped = [
        p
        for p in UNITS_DATA.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert shipped
    with zipfile.ZipFile(artifacts.agent_wheel) as wheel:
        for path in shipped:
            name = path.relative_to(REPO_ROOT).as_posix()
            assert wheel.read(name) == path.read_bytes(), name
