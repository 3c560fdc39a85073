"""Placing a verified artifact into `versions/<v>/` and proving the build runs.

The archive is unpacked by `signed_release.build_archive.unpack_build` — the one definition of a
safe build, shared with `nachtwacht release sign`, which lints every build with the same rules
before it is signed. It is safe by construction (no tar filter): only plain relative paths,
folders, regular files and symlinks that stay inside the build, at most `MAX_MEMBERS` members and
no more bytes than the signed `unpacked_size`, with modes it chooses itself. It unpacks into
`versions/.<v>.tmp`, which is then fsynced and renamed into place; `.complete` (the artifact's
sha256) is written last: a folder without it is a torn install, never used.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from agent_daemon.disk.atomic_file import fsync_directory
from agent_daemon.errors import InstallFailed, SelfTestFailed, UnsafeArchive
from agent_daemon.updater.build_command import CommandFailed, run_bounded
from agent_daemon.updater.layout import InstallLayout
from signed_release.artifact import AGENT_ENTRY_POINT
from signed_release.build_archive import BuildRefused, unpack_build
from signed_release.errors import ArtifactError

__all__ = ["SELF_TEST_TIMEOUT_SECONDS", "install_build", "self_test"]

SELF_TEST_TIMEOUT_SECONDS = 30.0


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
    layout: InstallLayout,
    artifact: Path,
    *,
    version: str,
    sha256: str,
    unpacked_size: int,
    compressed: bool = True,
) -> Path:
    """`versions/<version>/`, complete. Installing the same build again does nothing. `artifact`
    is the verified tar.gz, or (not `compressed`) the verified tar a patch made; `sha256` is the
    release's artifact hash either way, the build's name in `.complete`."""
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
    staging = layout.staging_dir(version)
    shutil.rmtree(staging, ignore_errors=True)
    try:
        # Removes `staging` again on any failure.
        unpack_build(artifact, staging, unpacked_size=unpacked_size, compressed=compressed)
    except BuildRefused as exc:
        raise UnsafeArchive(f"archive refused for {version}: {exc}") from exc
    except ArtifactError as exc:
        raise InstallFailed(f"cannot unpack {artifact.name} for {version}: {exc}") from exc
    entry = staging / AGENT_ENTRY_POINT
    if not (entry.is_file() and not entry.is_symlink() and os.access(entry, os.X_OK)):
        shutil.rmtree(staging, ignore_errors=True)
        raise InstallFailed(f"build {version} holds no executable {AGENT_ENTRY_POINT}")
    _fsync_tree(staging)
    return layout.complete(staging, version, sha256)


def self_test(build: Path, version: str, *, user: str | None = None) -> None:
    """`<build>/bin/provibr-agent --version` must print exactly `version`; it runs as `user`
    (the managed agent's) when given, since it is the build's own code."""
    command = [str(build / AGENT_ENTRY_POINT), "--version"]
    try:
        result = run_bounded(command, timeout=SELF_TEST_TIMEOUT_SECONDS, user=user)
    except CommandFailed as exc:
        raise SelfTestFailed(f"self-test of {version} failed: {exc}") from exc
    printed = result.stdout.strip()
    if result.returncode != 0 or printed != version:
        raise SelfTestFailed(
            f"self-test of {version} failed: `{AGENT_ENTRY_POINT} --version` exited "
            f"{result.returncode} and printed {printed[:80]!r}, expected {version!r}"
        )
