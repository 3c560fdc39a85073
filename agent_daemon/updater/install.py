"""Placing a verified artifact into `versions/<v>/` and proving the build runs.

The archive is unpacked into `versions/.<v>.tmp` after every member has been checked (no absolute
paths, no `..`, no link that leaves the folder, no devices, no more bytes than the signed
`unpacked_size`), then fsynced, renamed into place, and `.complete` (the artifact's sha256) is
written last: a folder without it is a torn install, never used.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
import tarfile
from pathlib import Path

from agent_daemon.atomic_file import fsync_directory, write_bytes_atomically
from agent_daemon.errors import InstallFailed, SelfTestFailed, UnsafeArchive
from agent_daemon.updater.layout import COMPLETE_MARKER, InstallLayout
from signed_release import AGENT_ENTRY_POINT

__all__ = ["SELF_TEST_TIMEOUT_SECONDS", "check_members", "install_build", "self_test"]

SELF_TEST_TIMEOUT_SECONDS = 30.0


def _inside(name: str) -> bool:
    normal = posixpath.normpath(name)
    return not (posixpath.isabs(name) or normal == ".." or normal.startswith("../"))


def check_members(members: list[tarfile.TarInfo], *, unpacked_size: int) -> None:
    """Refuse an archive that could write outside its folder or beyond its signed size."""
    total = 0
    for member in members:
        name = member.name
        if posixpath.isabs(name) or ".." in name.split("/"):
            raise UnsafeArchive(
                f"archive member {name!r}: absolute paths and '..' are refused "
                "(expected paths inside the build folder)"
            )
        if member.issym():
            target = posixpath.join(posixpath.dirname(name), member.linkname)
            if posixpath.isabs(member.linkname) or not _inside(target):
                raise UnsafeArchive(
                    f"archive member {name!r}: a link to {member.linkname!r} leaves the build "
                    "folder (expected links inside it)"
                )
        elif member.islnk():
            if not _inside(member.linkname) or ".." in member.linkname.split("/"):
                raise UnsafeArchive(
                    f"archive member {name!r}: a hard link to {member.linkname!r} leaves the "
                    "build folder"
                )
        elif not (member.isfile() or member.isdir()):
            raise UnsafeArchive(
                f"archive member {name!r}: device, fifo and other special files are refused"
            )
        total += member.size if member.isfile() else 0
        if total > unpacked_size:
            raise UnsafeArchive(
                f"archive unpacks to more than the signed unpacked_size of {unpacked_size} bytes "
                f"(at member {name!r})"
            )


def _fsync_tree(root: Path) -> None:
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            if os.path.islink(path):
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fsync_directory(Path(directory))


def install_build(
    layout: InstallLayout, artifact: Path, *, version: str, sha256: str, unpacked_size: int
) -> Path:
    """`versions/<version>/`, complete. Installing the same build again does nothing."""
    layout.ensure()
    final = layout.version_dir(version)
    existing = layout.complete_sha256(version)
    if existing == sha256:
        return final
    if existing is not None:
        raise InstallFailed(
            f"version {version} is already installed from another build (sha256 {existing}, "
            f"this one {sha256}); a version's folder is never modified"
        )
    shutil.rmtree(final, ignore_errors=True)
    staging = layout.versions / f".{version}.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        with tarfile.open(artifact, mode="r:gz") as archive:
            members = archive.getmembers()
            check_members(members, unpacked_size=unpacked_size)
            # The data filter repeats the checks above inside the standard library.
            archive.extractall(staging, members=members, filter="data")
    except tarfile.FilterError as exc:
        # Link chains (`a -> .`, `a/b -> ..`) are only visible on disk, where the filter sees them.
        shutil.rmtree(staging, ignore_errors=True)
        raise UnsafeArchive(f"archive refused for {version}: {exc}") from exc
    except (tarfile.TarError, EOFError, OSError) as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallFailed(f"cannot unpack {artifact.name} for {version}: {exc}") from exc
    except UnsafeArchive:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    entry = staging / AGENT_ENTRY_POINT
    if not (entry.is_file() and os.access(entry, os.X_OK)):
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallFailed(f"build {version} holds no executable {AGENT_ENTRY_POINT}")
    _fsync_tree(staging)
    os.rename(staging, final)
    fsync_directory(layout.versions)
    write_bytes_atomically(final / COMPLETE_MARKER, f"{sha256}\n".encode(), mode=0o644)
    return final


def self_test(build: Path, version: str) -> None:
    """`<build>/bin/provibr-agent --version` must print exactly `version`."""
    command = [str(build / AGENT_ENTRY_POINT), "--version"]
    try:
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=SELF_TEST_TIMEOUT_SECONDS,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SelfTestFailed(f"self-test of {version} failed: {' '.join(command)}: {exc}") from exc
    printed = result.stdout.strip()
    if result.returncode != 0 or printed != version:
        raise SelfTestFailed(
            f"self-test of {version} failed: `{AGENT_ENTRY_POINT} --version` exited "
            f"{result.returncode} and printed {printed[:80]!r}, expected {version!r}"
        )
