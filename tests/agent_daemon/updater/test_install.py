"""Installing a build: hostile archives are refused before a byte is written, a build is whole
only once `.complete` exists, links are replaced atomically, retention never deletes what runs."""

from __future__ import annotations

import hashlib
import io
import os
import tarfile
from pathlib import Path

import pytest

from agent_daemon.errors import InstallFailed, SelfTestFailed, UnsafeArchive
from agent_daemon.updater.install import install_build, self_test
from agent_daemon.updater.layout import COMPLETE_MARKER, InstallLayout
from nachtwacht.demo_world.demo_agent import build_demo_agent
from signed_release.build_archive import MAX_MEMBERS
from tests.agent_daemon.updater_support.releases import evil_archive


def archive_with(
    member: tarfile.TarInfo, data: bytes = b"", *, extra: tarfile.TarInfo | None = None
) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        script = b"#!/bin/sh\necho 1.5.0\n"
        entry = tarfile.TarInfo("bin/provibr-agent")
        entry.size, entry.mode = len(script), 0o755
        archive.addfile(entry, io.BytesIO(script))
        if extra is not None:
            archive.addfile(extra)
        archive.addfile(member, io.BytesIO(data) if data else None)
    return buffer.getvalue()


def special(name: str, kind: bytes, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info


def chained_links_archive() -> bytes:
    """`l1 -> .` and `l1/l2 -> ..`: each link looks inside, together they lead out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        script = b"#!/bin/sh\necho 1.5.0\n"
        entry = tarfile.TarInfo("bin/provibr-agent")
        entry.size, entry.mode = len(script), 0o755
        archive.addfile(entry, io.BytesIO(script))
        archive.addfile(special("l1", tarfile.SYMTYPE, "."))
        archive.addfile(special("l1/l2", tarfile.SYMTYPE, ".."))
        escaped = tarfile.TarInfo("l1/l2/escaped")
        escaped.size = 3
        archive.addfile(escaped, io.BytesIO(b"pwn"))
    return buffer.getvalue()


def links_then_member_under_link() -> bytes:
    """`lib -> bin` and then `lib/x`: written through the link, `x` would land elsewhere."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        script = b"#!/bin/sh\necho 1.5.0\n"
        entry = tarfile.TarInfo("bin/provibr-agent")
        entry.size, entry.mode = len(script), 0o755
        archive.addfile(entry, io.BytesIO(script))
        archive.addfile(special("lib", tarfile.SYMTYPE, "bin"))
        under = tarfile.TarInfo("lib/x")
        under.size = 3
        archive.addfile(under, io.BytesIO(b"pwn"))
    return buffer.getvalue()


def archive_with_members(count: int) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for index in range(count):
            archive.addfile(tarfile.TarInfo(f"f{index}"), io.BytesIO(b""))
    return buffer.getvalue()


def install(tmp_path: Path, artifact: bytes, *, unpacked_size: int = 10_000) -> Path:
    path = tmp_path / "artifact.tar.gz"
    path.write_bytes(artifact)
    layout = InstallLayout(tmp_path / "root")
    return install_build(
        layout,
        path,
        version="1.5.0",
        sha256=hashlib.sha256(artifact).hexdigest(),
        unpacked_size=unpacked_size,
    )


@pytest.mark.parametrize(
    ("artifact", "message"),
    [
        pytest.param(evil_archive("../x"), "'../x'", id="dotdot"),
        pytest.param(evil_archive("bin/../../x"), "'bin/../../x'", id="dotdot_inside"),
        pytest.param(evil_archive("/etc/cron.d/x"), "absolute paths", id="absolute"),
        pytest.param(evil_archive("lib/escape", link_to="../../../etc/passwd"),
                     "leaves the build folder", id="symlink_up_and_out"),
        pytest.param(evil_archive("lib/escape", link_to="/etc/passwd"),
                     r"is refused \(expected a relative link inside the build\)",
                     id="symlink_absolute"),
        pytest.param(archive_with(special("lib/hard", tarfile.LNKTYPE, "../outside")),
                     "hard link", id="hardlink_out"),
        # The PATH_MAX family of 2025 bypassed the tar filter with link chains; the unpacker
        # refuses any link whose target passes through another link.
        pytest.param(chained_links_archive(), "lies under 'l1', which is a symlink",
                     id="symlink_chain"),
        pytest.param(archive_with(special("l2", tarfile.SYMTYPE, "l1/provibr-agent"),
                                  extra=special("l1", tarfile.SYMTYPE, "bin")),
                     "passes through the link 'l1'", id="symlink_through_a_symlink"),
        pytest.param(evil_archive("bin/evil\nname"), "control character",
                     id="newline_in_member_name"),
        pytest.param(evil_archive("bin/\x1b[2Jclear"), "control character",
                     id="escape_sequence_in_member_name"),
        pytest.param(archive_with(special("lib/inner", tarfile.LNKTYPE, "bin/provibr-agent")),
                     "hard links are refused", id="hardlink_even_inside"),
        pytest.param(links_then_member_under_link(), "lies under", id="member_under_a_link"),
        pytest.param(archive_with_members(MAX_MEMBERS + 1), f"more than {MAX_MEMBERS} members",
                     id="too_many_members"),
        pytest.param(archive_with(special("dev/sda", tarfile.BLKTYPE)), "special files",
                     id="block_device"),
        pytest.param(archive_with(special("run/fifo", tarfile.FIFOTYPE)), "special files",
                     id="fifo"),
    ],
)  # fmt: skip
def test_a_hostile_archive_is_refused_and_nothing_is_written(
    tmp_path: Path, artifact: bytes, message: str
) -> None:
    with pytest.raises(UnsafeArchive, match=message):
        install(tmp_path, artifact)
    assert os.listdir(tmp_path / "root/versions") == []
    assert not (tmp_path / "x").exists()
    assert not (tmp_path / "root/escaped").exists()
    assert not (tmp_path / "root/versions/escaped").exists()


def test_an_internal_symlink_is_allowed(tmp_path: Path) -> None:
    final = install(tmp_path, evil_archive("bin/agent", link_to="provibr-agent"))
    assert os.readlink(final / "bin/agent") == "provibr-agent"


def test_an_archive_larger_than_its_signed_unpacked_size_is_refused(tmp_path: Path) -> None:
    big = tarfile.TarInfo("share/blob")
    big.size = 50_000
    artifact = archive_with(big, b"\0" * 50_000)
    with pytest.raises(UnsafeArchive, match="more than the signed unpacked_size of 10000"):
        install(tmp_path, artifact)


def test_a_build_is_complete_only_with_its_marker_holding_the_sha256(tmp_path: Path) -> None:
    artifact = build_demo_agent(tmp_path / "a.tar.gz", version="1.5.0").read_bytes()
    final = install(tmp_path, artifact)
    assert (final / COMPLETE_MARKER).read_text().strip() == hashlib.sha256(artifact).hexdigest()
    assert not list((tmp_path / "root/versions").glob(".*.tmp"))


def test_installing_the_same_build_twice_changes_nothing(tmp_path: Path) -> None:
    artifact = build_demo_agent(tmp_path / "a.tar.gz", version="1.5.0").read_bytes()
    final = install(tmp_path, artifact)
    before = (final / COMPLETE_MARKER).stat().st_mtime_ns
    assert install(tmp_path, artifact) == final
    assert (final / COMPLETE_MARKER).stat().st_mtime_ns == before


def test_a_torn_install_without_marker_is_redone(tmp_path: Path) -> None:
    artifact = build_demo_agent(tmp_path / "a.tar.gz", version="1.5.0").read_bytes()
    torn = tmp_path / "root/versions/1.5.0"
    torn.mkdir(parents=True)
    (torn / "half-written").write_text("x")
    final = install(tmp_path, artifact)
    assert not (final / "half-written").exists()
    assert (final / COMPLETE_MARKER).exists()


def test_another_build_under_an_installed_version_name_is_refused(tmp_path: Path) -> None:
    first = build_demo_agent(tmp_path / "a.tar.gz", version="1.5.0").read_bytes()
    install(tmp_path, first)
    other = build_demo_agent(tmp_path / "b.tar.gz", version="1.5.0", fault="crash").read_bytes()
    with pytest.raises(InstallFailed, match="already installed from another build"):
        install(tmp_path, other)


def test_the_self_test_needs_the_exact_version(tmp_path: Path) -> None:
    good = install(tmp_path, build_demo_agent(tmp_path / "g.tar.gz", version="1.5.0").read_bytes())
    self_test(good, "1.5.0")
    with pytest.raises(SelfTestFailed, match=r"printed '1\.5\.0', expected '1\.5\.1'"):
        self_test(good, "1.5.1")


def make_versions(layout: InstallLayout, *versions: str) -> None:
    for version in versions:
        folder = layout.versions / version
        folder.mkdir(parents=True)
        (folder / COMPLETE_MARKER).write_text("ab" * 32)


def test_links_are_relative_and_name_complete_versions(tmp_path: Path) -> None:
    layout = InstallLayout(tmp_path)
    make_versions(layout, "1.4.1", "1.5.0")
    layout.point("current", "1.5.0")
    layout.point("previous", "1.4.1")
    assert os.readlink(tmp_path / "current") == "versions/1.5.0"
    assert layout.link_target("current") == "1.5.0"
    layout.point("current", "1.4.1")
    assert layout.link_target("current") == "1.4.1"
    assert not (tmp_path / ".current.tmp").exists()


def test_a_link_to_a_torn_version_does_not_count_as_installed(tmp_path: Path) -> None:
    layout = InstallLayout(tmp_path)
    (layout.versions / "1.5.0").mkdir(parents=True)
    os.symlink("versions/1.5.0", tmp_path / "current")
    assert layout.link_target("current") is None


def test_retention_keeps_three_and_never_current_previous_or_protected(tmp_path: Path) -> None:
    layout = InstallLayout(tmp_path)
    make_versions(layout, "1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0")
    layout.point("current", "1.0.0")
    layout.point("previous", "1.1.0")
    removed = layout.apply_retention(protected=["1.2.0"], bad=[])
    assert removed == ["1.3.0", "1.4.0", "1.5.0"]
    assert layout.installed_versions() == ["1.0.0", "1.1.0", "1.2.0"]


def test_retention_removes_bad_and_torn_versions_first(tmp_path: Path) -> None:
    layout = InstallLayout(tmp_path)
    make_versions(layout, "1.3.0", "1.4.0", "1.5.0")
    (layout.versions / "1.6.0").mkdir()
    layout.point("current", "1.4.0")
    removed = layout.apply_retention(protected=[], bad=["1.5.0"])
    assert sorted(removed) == ["1.5.0", "1.6.0"]
    assert layout.installed_versions() == ["1.3.0", "1.4.0"]


def test_retention_never_deletes_a_bad_version_that_is_current(tmp_path: Path) -> None:
    layout = InstallLayout(tmp_path)
    make_versions(layout, "1.5.0")
    layout.point("current", "1.5.0")
    assert layout.apply_retention(protected=[], bad=["1.5.0"]) == []


def test_an_archive_without_the_agent_entry_point_is_refused(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        readme = tarfile.TarInfo("README")
        readme.size = 2
        archive.addfile(readme, io.BytesIO(b"hi"))
    with pytest.raises(InstallFailed, match="holds no executable bin/provibr-agent"):
        install(tmp_path, buffer.getvalue())
    assert os.listdir(tmp_path / "root/versions") == []


def test_a_corrupt_archive_is_an_install_failure(tmp_path: Path) -> None:
    with pytest.raises(InstallFailed, match="cannot unpack"):
        install(tmp_path, b"\x1f\x8b not really gzip")
    assert os.listdir(tmp_path / "root/versions") == []


@pytest.mark.parametrize(
    "name",
    [pytest.param("../etc", id="dotdot"), pytest.param("1.5", id="not_a_version"),
     pytest.param("current", id="word")],
)  # fmt: skip
def test_a_folder_name_must_be_a_version(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="cannot name an install folder"):
        InstallLayout(tmp_path).version_dir(name)
