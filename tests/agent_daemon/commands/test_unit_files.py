"""The units `install` writes: the shipped texts are `packaging/systemd/`'s own files, a package's
unit is never shadowed, an administrator's unit never overwritten."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_daemon.commands.unit_files import (
    UNIT_NAMES,
    WRITTEN_BY_BUNDLE,
    WRITTEN_BY_INSTALL,
    managed_agent_user,
    place_units,
    shipped_unit,
    written_by_bundle,
    written_by_install,
)
from tests.worlds.processes import REPO_ROOT

UNITS = REPO_ROOT / "agent_daemon" / "host" / "units"


@pytest.mark.parametrize("name", UNIT_NAMES)
def test_a_shipped_unit_is_a_relative_link_to_the_packaging_file(name: str) -> None:
    link = UNITS / name
    assert link.is_symlink()
    target = os.readlink(link)
    assert not os.path.isabs(target)
    assert link.resolve() == REPO_ROOT / "packaging" / "systemd" / name
    assert shipped_unit(name) == (REPO_ROOT / "packaging" / "systemd" / name).read_bytes()


def test_units_are_written_with_the_mark_uninstall_looks_for(tmp_path: Path) -> None:
    placement = place_units(tmp_path, package_dirs=(tmp_path / "none",))
    assert placement.written == [tmp_path / name for name in UNIT_NAMES]
    for name in UNIT_NAMES:
        assert (tmp_path / name).read_bytes() == WRITTEN_BY_INSTALL + shipped_unit(name)
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644
        assert written_by_install(tmp_path / name)


def test_a_unit_a_package_installed_is_not_written_again(tmp_path: Path) -> None:
    package_dir = tmp_path / "lib"
    package_dir.mkdir()
    (package_dir / "nachtwacht-agent.service").write_bytes(shipped_unit("nachtwacht-agent.service"))
    admin = tmp_path / "etc"
    admin.mkdir()
    placement = place_units(admin, package_dirs=(package_dir,))
    assert placement.by_package == [package_dir / "nachtwacht-agent.service"]
    assert not (admin / "nachtwacht-agent.service").exists()
    assert placement.ours("nachtwacht-agent.service")


def test_the_administrators_own_unit_is_kept(tmp_path: Path) -> None:
    own = tmp_path / "provibr-agent.service"
    own.write_text("[Service]\nExecStart=/srv/agent\n")
    placement = place_units(tmp_path, package_dirs=())
    assert placement.kept == [own]
    assert own.read_text() == "[Service]\nExecStart=/srv/agent\n"
    assert not written_by_install(own)
    assert not placement.ours("provibr-agent.service")


def test_the_bundles_units_are_used_as_a_packages_not_kept_as_the_administrators(
    tmp_path: Path,
) -> None:
    # install.sh puts them in the administrator's directory: `install` must still enable them.
    for name in UNIT_NAMES:
        (tmp_path / name).write_bytes(WRITTEN_BY_BUNDLE + shipped_unit(name))
    placement = place_units(tmp_path, package_dirs=())
    assert placement.by_bundle == [tmp_path / name for name in UNIT_NAMES]
    assert placement.kept == placement.written == []
    for name in UNIT_NAMES:
        assert placement.ours(name)
        assert (tmp_path / name).read_bytes() == WRITTEN_BY_BUNDLE + shipped_unit(name)
        assert written_by_bundle(tmp_path / name)
        assert not written_by_install(tmp_path / name)


def test_the_bundles_install_sh_writes_the_very_mark_install_looks_for() -> None:
    script = (REPO_ROOT / "packaging" / "bundle" / "install.sh").read_text()
    line = WRITTEN_BY_BUNDLE.decode().rstrip("\n")
    assert f'echo "{line}"' in script


def test_a_unit_install_wrote_before_is_brought_up_to_date(tmp_path: Path) -> None:
    old = tmp_path / "nachtwacht-agent.service"
    old.write_bytes(WRITTEN_BY_INSTALL + b"[Service]\nExecStart=/old\n")
    placement = place_units(tmp_path, package_dirs=())
    assert old in placement.written
    assert old.read_bytes() == WRITTEN_BY_INSTALL + shipped_unit("nachtwacht-agent.service")


@pytest.mark.parametrize(
    ("unit", "expected"),
    [
        pytest.param("[Service]\nUser=provibr-agent\nGroup=provibr-agent\n", "provibr-agent",
                     id="fixed_user"),
        pytest.param("[Service]\nDynamicUser=yes\n", None, id="dynamic_user"),
        pytest.param("[Service]\nUser=root\n", None, id="root"),
        pytest.param("[Service]\nUser=first\nUser=  last \n", "last", id="last_one_wins"),
    ],
)  # fmt: skip
def test_the_managed_agents_user_is_its_units_user(
    tmp_path: Path, unit: str, expected: str | None
) -> None:
    (tmp_path / "provibr-agent.service").write_text(unit)
    assert managed_agent_user(tmp_path, package_dirs=()) == expected


def test_the_packages_unit_wins_for_the_managed_agents_user(tmp_path: Path) -> None:
    package_dir, admin = tmp_path / "lib", tmp_path / "etc"
    package_dir.mkdir()
    admin.mkdir()
    (package_dir / "provibr-agent.service").write_text("[Service]\nUser=packaged\n")
    (admin / "provibr-agent.service").write_text("[Service]\nUser=other\n")
    assert managed_agent_user(admin, package_dirs=(package_dir,)) == "packaged"
