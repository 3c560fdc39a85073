"""The install root on disk and the only code that changes its links.

    <install_root>/
        versions/<version>/     one build each, never modified after install
            .complete           its sha256, written last: the build is whole
        versions/.<version>.tmp an unpack in progress (deleted on sight)
        current -> versions/<version>
        previous -> versions/<version>

Links are replaced, never removed and re-made: a new symlink is created under a temporary name and
renamed over the old one with `os.replace` (atomic), then the directory is fsynced so the rename
survives a power cut. `current` therefore always names exactly one complete version.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from agent_daemon.disk.atomic_file import fsync_directory, write_bytes_atomically
from signed_release.versions import is_valid_version, version_key

__all__ = [
    "COMPLETE_MARKER",
    "MAX_VERSIONS",
    "InstallLayout",
]

COMPLETE_MARKER = ".complete"
MAX_VERSIONS = 3


class InstallLayout:
    def __init__(self, install_root: Path) -> None:
        self.root = install_root
        self.versions = install_root / "versions"

    def ensure(self) -> None:
        self.versions.mkdir(parents=True, exist_ok=True)

    def version_dir(self, version: str) -> Path:
        if not is_valid_version(version):
            raise ValueError(f"version: {version!r} cannot name an install folder")
        return self.versions / version

    def staging_dir(self, version: str) -> Path:
        """Where a build of `version` is made before it is whole (`versions/.<version>.tmp`)."""
        return self.version_dir(version).with_name(f".{version}.tmp")

    def complete(self, staging: Path, version: str, sha256: str) -> Path:
        """Move the build made in `staging` into `versions/<version>/` and write its `.complete`
        (its sha256) last, each step made durable; the build's folder."""
        final = self.version_dir(version)
        os.rename(staging, final)
        fsync_directory(self.versions)
        write_bytes_atomically(final / COMPLETE_MARKER, f"{sha256}\n".encode(), mode=0o644)
        return final

    def complete_sha256(self, version: str) -> str | None:
        """The sha256 in the version's `.complete` marker; None when it is not whole."""
        try:
            return (self.version_dir(version) / COMPLETE_MARKER).read_text().strip() or None
        except (OSError, ValueError):
            return None

    def link_target(self, name: str) -> str | None:
        """The version a link (`current` or `previous`) names, when it names a complete one."""
        try:
            target = os.readlink(self.root / name)
        except OSError:
            return None
        parent, _, version = target.rpartition("/")
        if parent != "versions" or self.complete_sha256(version) is None:
            return None
        return version

    def point(self, name: str, version: str | None) -> None:
        """Make link `name` name `version` (or remove it for None), atomically and durably."""
        link = self.root / name
        if version is None:
            if link.is_symlink():
                link.unlink()
                fsync_directory(self.root)
            return
        self.version_dir(version)  # validates the name
        temporary = self.root / f".{name}.tmp"
        temporary.unlink(missing_ok=True)
        # Relative, so the tree still works when the install root is moved or bind-mounted.
        os.symlink(f"versions/{version}", temporary)
        os.replace(temporary, link)
        fsync_directory(self.root)

    def installed_versions(self) -> list[str]:
        if not self.versions.is_dir():
            return []
        found = [
            entry.name
            for entry in self.versions.iterdir()
            if is_valid_version(entry.name) and entry.is_dir() and not entry.is_symlink()
        ]
        return sorted(found, key=version_key)

    def remove_version(self, version: str) -> None:
        shutil.rmtree(self.version_dir(version), ignore_errors=True)
        fsync_directory(self.versions)

    def clean_temporaries(self) -> None:
        for entry in self.versions.glob(".*.tmp") if self.versions.is_dir() else ():
            shutil.rmtree(entry, ignore_errors=True)

    def apply_retention(self, protected: Iterable[str | None], bad: Iterable[str]) -> list[str]:
        """Delete bad, torn and surplus versions, oldest first, keeping at most MAX_VERSIONS.

        Never deletes `current`, `previous` or anything in `protected` (what the state file points
        at). Returns the removed versions."""
        keep = {name for name in protected if name}
        keep |= {v for v in (self.link_target("current"), self.link_target("previous")) if v}
        installed = self.installed_versions()
        # A folder without its marker is a torn install: as useless as a bad one.
        bad_set = set(bad) | {v for v in installed if self.complete_sha256(v) is None}
        removable = [v for v in installed if v not in keep and v in bad_set]
        removable += [v for v in installed if v not in keep and v not in bad_set]
        removed: list[str] = []
        remaining = len(installed)
        for version in removable:
            if version not in bad_set and remaining <= MAX_VERSIONS:
                break
            self.remove_version(version)
            removed.append(version)
            remaining -= 1
        return removed
