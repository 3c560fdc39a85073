"""What an agent build may hold, decided once: the signing tool lints a build with these rules and
the agent unpacks with them, so a bad build is refused once at signing time, not on every host.

Safe by construction, not by filter. The standard library's tar filter has been bypassed before
(the PATH_MAX symlink family of 2025, fixed only in 3.11.13 / 3.12.11 / 3.13.4), so nothing here
relies on it. A build is a tree of directories, regular files and relative symlinks, and:

* every name is a plain relative path: no NUL or control characters, no absolute path, no `..`,
  no component longer than a file system allows, each name at most once;
* no member lies under a symlink, and a symlink's target, read relative to its folder, stays inside
  the build without passing through another symlink — so reading it lexically *is* resolving it;
* no hard links, devices, fifos or other special files; at most `MAX_MEMBERS` members, and no more
  bytes than the signed `unpacked_size`;
* unpacking writes directories first, then files (created new, never following a link), then the
  symlinks last, with modes it chooses itself (no setuid, setgid or sticky bits, no world write).
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from signed_release.errors import ArtifactError

__all__ = [
    "MAX_MEMBERS",
    "MAX_PATH_BYTES",
    "BuildEntry",
    "BuildRefused",
    "lint_build",
    "read_members",
    "unpack_build",
]

# An agent is a few dozen files; ten thousand leaves room and bounds the index a host reads.
MAX_MEMBERS = 10_000
# Linux's NAME_MAX per component and a total far below PATH_MAX once joined to the install root.
MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 1024
_COPY_CHUNK = 1024 * 1024

EntryKind = Literal["dir", "file", "symlink"]


class BuildRefused(ArtifactError):
    """The build holds a member that cannot be proven safe to unpack; names the member and why."""


@dataclass(frozen=True, kw_only=True)
class BuildEntry:
    """One member, proven safe: its normalised path, kind, size, whether it is executable, and for
    a symlink its target."""

    path: PurePosixPath
    kind: EntryKind
    size: int = 0
    executable: bool = False
    target: str | None = None
    member: tarfile.TarInfo | None = None


def _shown(name: str) -> str:
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def _clean_text(name: str, what: str) -> None:
    for character in name:
        if ord(character) < 0x20 or ord(character) == 0x7F:
            raise BuildRefused(
                f"{what} {_shown(name)}: holds the control character {character!r} "
                "(expected printable names)"
            )
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BuildRefused(f"{what} {_shown(name)}: is not valid UTF-8 text") from exc
    if len(encoded) > MAX_PATH_BYTES:
        raise BuildRefused(
            f"{what} {_shown(name)}: is {len(encoded)} bytes long (at most {MAX_PATH_BYTES})"
        )


def _relative_path(name: str) -> PurePosixPath | None:
    """The member's path inside the build, or None for the build's own root (`.` or `./`)."""
    _clean_text(name, "archive member")
    if name.startswith("/"):
        raise BuildRefused(
            f"archive member {_shown(name)}: absolute paths are refused "
            "(expected paths inside the build folder)"
        )
    parts = [part for part in name.split("/") if part not in {"", "."}]
    if ".." in parts:
        raise BuildRefused(
            f"archive member {_shown(name)}: '..' is refused (expected paths inside the build)"
        )
    for part in parts:
        if len(part.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise BuildRefused(
                f"archive member {_shown(name)}: a component is longer than "
                f"{MAX_COMPONENT_BYTES} bytes"
            )
    return PurePosixPath(*parts) if parts else None


def _kind(member: tarfile.TarInfo) -> EntryKind:
    if member.isfile():
        return "file"
    if member.isdir():
        return "dir"
    if member.issym():
        return "symlink"
    if member.islnk():
        raise BuildRefused(
            f"archive member {_shown(member.name)}: hard links are refused "
            "(a build needs none; use a copy or a relative symlink)"
        )
    raise BuildRefused(
        f"archive member {_shown(member.name)}: devices, fifos and other special files are refused"
    )


def _link_target(path: PurePosixPath, target: str, links: set[PurePosixPath]) -> PurePosixPath:
    """Where the link at `path` points, inside the build, or the refusal."""
    _clean_text(target, f"symlink {str(path)!r} ->")
    if not target or target.startswith("/"):
        raise BuildRefused(
            f"archive member {_shown(str(path))}: a link to {_shown(target)} is refused "
            "(expected a relative link inside the build)"
        )
    resolved: list[str] = list(path.parent.parts)
    for part in target.split("/"):
        if part in {"", "."}:
            continue
        if part == "..":
            if not resolved:
                raise BuildRefused(
                    f"archive member {_shown(str(path))}: a link to {_shown(target)} leaves the "
                    "build folder (expected links inside it)"
                )
            resolved.pop()
            continue
        resolved.append(part)
        if PurePosixPath(*resolved) in links:
            # Through another link, the lexical reading is no longer the real one.
            raise BuildRefused(
                f"archive member {_shown(str(path))}: a link to {_shown(target)} passes through "
                f"the link {'/'.join(resolved)!r} (expected targets without links on the way)"
            )
    return PurePosixPath(*resolved)


def lint_build(
    members: Iterable[tarfile.TarInfo], *, unpacked_size: int | None = None
) -> tuple[BuildEntry, ...]:
    """Every member of a build, proven safe to unpack, or `BuildRefused` naming the first that is
    not. `unpacked_size`, when given, bounds the bytes of all regular files together."""
    entries: list[BuildEntry] = []
    seen: dict[PurePosixPath, EntryKind] = {}
    total = 0
    for count, member in enumerate(members, start=1):
        if count > MAX_MEMBERS:
            raise BuildRefused(f"the archive holds more than {MAX_MEMBERS} members")
        path = _relative_path(member.name)
        kind = _kind(member)
        if path is None:
            if kind != "dir":
                raise BuildRefused(
                    f"archive member {_shown(member.name)}: the root is not a folder"
                )
            continue
        if path in seen:
            raise BuildRefused(
                f"archive member {_shown(member.name)}: appears twice (expected each path once)"
            )
        for parent in path.parents:
            if seen.get(parent) in {"file", "symlink"}:
                raise BuildRefused(
                    f"archive member {_shown(member.name)}: lies under {str(parent)!r}, which is "
                    f"a {seen[parent]}, not a folder"
                )
        seen[path] = kind
        if kind == "file":
            total += member.size
            if unpacked_size is not None and total > unpacked_size:
                raise BuildRefused(
                    f"the archive unpacks to more than the signed unpacked_size of "
                    f"{unpacked_size} bytes (at member {_shown(member.name)})"
                )
        entries.append(
            BuildEntry(
                path=path,
                kind=kind,
                size=member.size if kind == "file" else 0,
                executable=bool(member.mode & 0o111),
                target=member.linkname if kind == "symlink" else None,
                member=member,
            )
        )
    links = {entry.path for entry in entries if entry.kind == "symlink"}
    for entry in entries:
        for parent in entry.path.parents:
            if parent in links:
                raise BuildRefused(
                    f"archive member {_shown(str(entry.path))}: lies under the link "
                    f"{str(parent)!r} (expected no members inside links)"
                )
        if entry.kind == "symlink":
            assert entry.target is not None
            _link_target(entry.path, entry.target, links)
    return tuple(entries)


def read_members(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The archive's members one by one, stopping past `MAX_MEMBERS`: a hostile index is never
    read whole into memory."""
    for count, member in enumerate(archive, start=1):
        yield member
        if count > MAX_MEMBERS:
            return


def unpack_build(
    archive_path: Path, destination: Path, *, unpacked_size: int, compressed: bool = True
) -> None:
    """Unpack the build at `archive_path` (tar.gz; a plain tar when not `compressed`: a delta
    update's tar, verified against its signed hash) into `destination`, which must not exist.

    Raises `BuildRefused` for a member that is not provably safe, `ArtifactError` for an archive
    that cannot be read; on any failure `destination` is removed again.
    """
    destination.mkdir(mode=0o755)
    try:
        with tarfile.open(archive_path, mode="r:gz" if compressed else "r:") as archive:
            entries = lint_build(read_members(archive), unpacked_size=unpacked_size)
            _write(archive, entries, destination)
    except BaseException as exc:
        shutil.rmtree(destination, ignore_errors=True)
        if isinstance(exc, (tarfile.TarError, EOFError)):
            raise ArtifactError(f"{archive_path.name}: not a readable tar.gz ({exc})") from exc
        raise


def _write(archive: tarfile.TarFile, entries: tuple[BuildEntry, ...], root: Path) -> None:
    # Folders first, then files, links last: while anything is written no link exists to follow.
    for entry in sorted((e for e in entries if e.kind == "dir"), key=lambda e: len(e.path.parts)):
        (root / entry.path).mkdir(mode=0o755, parents=True, exist_ok=True)
    for entry in entries:
        if entry.kind != "file":
            continue
        assert entry.member is not None
        target = root / entry.path
        target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        source = archive.extractfile(entry.member)
        if source is None:
            raise BuildRefused(f"archive member {_shown(str(entry.path))}: has no contents")
        mode = 0o755 if entry.executable else 0o644
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        descriptor = os.open(target, flags, mode)
        with os.fdopen(descriptor, "wb") as sink, source:
            remaining = entry.size
            while remaining > 0:
                chunk = source.read(min(_COPY_CHUNK, remaining))
                if not chunk:
                    raise ArtifactError(
                        f"archive member {_shown(str(entry.path))}: ends before its "
                        f"{entry.size} bytes"
                    )
                sink.write(chunk)
                remaining -= len(chunk)
        # The process umask must not decide a build's modes (it may strip the executable bit).
        os.chmod(target, mode, follow_symlinks=False)
    for entry in entries:
        if entry.kind == "symlink":
            assert entry.target is not None
            target = root / entry.path
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            os.symlink(entry.target, target)
    for entry in entries:
        if entry.kind == "dir":
            # Readable by the managed agent's own user, writable only by the updater.
            os.chmod(root / entry.path, 0o755)  # noqa: S103
