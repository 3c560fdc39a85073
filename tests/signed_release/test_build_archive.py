"""What a build may hold: each test is an attack on the host that unpacks it, with the archive that
carries it; the same rules refuse it when it is signed (`nachtwacht release sign`)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from signed_release.artifact import describe_artifact
from signed_release.build_archive import MAX_MEMBERS, BuildRefused, unpack_build
from signed_release.cli import main
from signed_release.errors import ArtifactError

Member = tuple[str, str, object]  # (kind, name, contents or link target)


def _archive(path: Path, members: list[Member]) -> Path:
    # PAX headers carry a name exactly as given (a NUL included), as a hostile signer could.
    with tarfile.open(path, mode="w:gz", format=tarfile.PAX_FORMAT) as archive:
        for kind, name, value in members:
            info = tarfile.TarInfo(name)
            info.pax_headers = {"path": name}
            data = b""
            if kind == "file":
                data = value if isinstance(value, bytes) else b"x"
                info.size = len(data)
                info.mode = 0o755
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
            elif kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = str(value)
            elif kind == "hardlink":
                info.type = tarfile.LNKTYPE
                info.linkname = str(value)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            elif kind == "chardev":
                info.type = tarfile.CHRTYPE
            elif kind == "setuid":
                data = b"#!/bin/sh\n"
                info.size = len(data)
                info.mode = 0o4777
            archive.addfile(info, io.BytesIO(data) if data else None)
    return path


AGENT: Member = ("file", "bin/provibr-agent", b"#!/bin/sh\necho 1.0.0\n")


def _refused(tmp_path: Path, members: list[Member], match: str) -> None:
    build = _archive(tmp_path / "build.tar.gz", [AGENT, *members])
    destination = tmp_path / "unpacked"
    with pytest.raises(BuildRefused, match=match):
        unpack_build(build, destination, unpacked_size=10**9)
    assert not destination.exists()  # nothing half-written is left behind
    with pytest.raises(BuildRefused, match=match):
        describe_artifact(build)  # and the signer refuses it the same way


@pytest.mark.parametrize(
    ("members", "match"),
    [
        pytest.param([("file", "/etc/cron.d/evil", b"")], "absolute paths", id="absolute_path"),
        pytest.param([("file", "../outside", b"")], "'..' is refused", id="dot_dot_escape"),
        pytest.param([("file", "bin/../../x", b"")], "'..' is refused", id="inner_dot_dot_escape"),
        pytest.param([("symlink", "lib", "/etc")], "relative link inside", id="absolute_symlink"),
        pytest.param(
            [("symlink", "bin/up", "../../..")], "leaves the build", id="symlink_leaves_root"
        ),
        pytest.param(
            [("symlink", "a", "."), ("symlink", "b", "a/../..")],
            "passes through the link",
            id="symlink_chain_through_a_link",
        ),
        pytest.param(
            [("symlink", "a", "."), ("symlink", "b", "a/..")],
            "passes through the link",
            id="symlink_chain_lexically_inside_really_outside",
        ),
        pytest.param(
            [("symlink", "etc", "bin"), ("file", "etc/passwd", b"root::0:0")],
            "lies under",
            id="file_written_through_a_symlink",
        ),
        pytest.param(
            [("symlink", "x", "bin"), ("symlink", "y", "x")],
            "passes through the link",
            id="link_to_a_link",
        ),
        pytest.param([("hardlink", "h", "/etc/shadow")], "hard links", id="hard_link_outside"),
        pytest.param([("hardlink", "h", "bin/provibr-agent")], "hard links", id="hard_link_inside"),
        pytest.param([("fifo", "pipe", None)], "special files", id="fifo"),
        pytest.param([("chardev", "dev/mem", None)], "special files", id="device"),
        pytest.param([("file", "bin/a\x00b", b"")], "control character", id="nul_in_name"),
        pytest.param([("file", "bin/\x1b[2Jx", b"")], "control character", id="escape_in_name"),
        pytest.param([("file", "bin/x\nfake log", b"")], "control character", id="newline"),
        pytest.param([("file", "a" * 300, b"")], "longer than 255", id="component_too_long"),
        pytest.param([("file", "/".join(["d" * 200] * 6), b"")], "bytes long", id="path_too_long"),
        pytest.param(
            [("file", "bin/provibr-agent", b"#!/bin/sh\necho 6.6.6\n")],
            "appears twice",
            id="member_overwrites_the_entry_point",
        ),
        pytest.param(
            [("file", "conf", b""), ("file", "conf/x", b"")], "lies under", id="file_as_folder"
        ),
        pytest.param(
            [("symlink", "bin/provibr-agent", "x")], "appears twice", id="entry_replaced_by_link"
        ),
    ],
)
def test_a_build_that_could_write_outside_its_folder_is_refused(
    tmp_path: Path, members: list[Member], match: str
) -> None:
    _refused(tmp_path, members, match)


def test_a_build_with_more_members_than_the_bound_is_refused(tmp_path: Path) -> None:
    many: list[Member] = [("dir", f"d{index}", None) for index in range(MAX_MEMBERS + 1)]
    _refused(tmp_path, many, f"more than {MAX_MEMBERS} members")


def test_a_build_larger_than_its_signed_size_is_refused(tmp_path: Path) -> None:
    build = _archive(tmp_path / "b.tar.gz", [AGENT, ("file", "big", b"0" * 4096)])
    with pytest.raises(BuildRefused, match="unpacked_size of 100 bytes"):
        unpack_build(build, tmp_path / "out", unpacked_size=100)
    assert not (tmp_path / "out").exists()


def test_a_build_that_is_not_an_archive_is_an_artifact_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"\x1f\x8b" + os.urandom(64))
    with pytest.raises(ArtifactError):
        unpack_build(junk, tmp_path / "out", unpacked_size=10**6)
    assert not (tmp_path / "out").exists()


def test_a_good_build_unpacks_with_modes_the_unpacker_chooses(tmp_path: Path) -> None:
    members: list[Member] = [
        AGENT,
        ("dir", "lib", None),
        ("file", "lib/libx.so.1", b"ELF"),
        ("symlink", "lib/libx.so", "libx.so.1"),
        ("symlink", "bin/lib", "../lib"),
        ("setuid", "bin/helper", None),
    ]
    build = _archive(tmp_path / "good.tar.gz", members)
    old_umask = os.umask(0o077)  # a caller's umask must not decide the build's modes
    try:
        unpack_build(build, tmp_path / "v1", unpacked_size=10**6)
    finally:
        os.umask(old_umask)
    root = tmp_path / "v1"
    assert (root / "bin/provibr-agent").read_bytes() == b"#!/bin/sh\necho 1.0.0\n"
    assert stat.S_IMODE((root / "bin/provibr-agent").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "bin/helper").stat().st_mode) == 0o755  # no setuid, no o+w
    assert stat.S_IMODE((root / "lib").stat().st_mode) == 0o755
    assert os.readlink(root / "lib/libx.so") == "libx.so.1"
    assert (root / "bin/lib/libx.so").read_bytes() == b"ELF"


def test_unpacking_never_writes_into_an_existing_folder(tmp_path: Path) -> None:
    build = _archive(tmp_path / "good.tar.gz", [AGENT])
    (tmp_path / "v1").mkdir()
    with pytest.raises(FileExistsError):
        unpack_build(build, tmp_path / "v1", unpacked_size=10**6)


def test_release_sign_refuses_a_build_the_agent_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build = _archive(tmp_path / "bad.tar.gz", [AGENT, ("symlink", "up", "../..")])
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    signed = tmp_path / "signed"
    code = main(
        [
            "sign",
            *("--key", str(tmp_path / "keys/release.key"), "--version", "1.0.0"),
            *("--channel", "stable", "--platform", "linux-x86_64", "--out", str(signed)),
            str(build),
        ]
    )
    assert code == 2
    assert "leaves the build folder" in capsys.readouterr().err
    assert not signed.exists()
