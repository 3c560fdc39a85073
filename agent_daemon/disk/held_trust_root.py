"""The trust root this host holds: one file in the state directory, the exact bytes of the newest
version it verified (`signed_release.trust_root` is the format and its rules).

A root is stored only after it was verified — by `self_signed_root` at enroll, by the previous
root (or, once, by a trusted-key file) when the daemon follows the chain — so reading it back needs
no signature check and no `tuf`: plain `json` gives the version, the expiry and the release keys.
That keeps an idle daemon, and `status`, free of `tuf` and `cryptography`; the updater reads the
file again each time an update verifies, so a root that dropped a key holds from that update on.

The file is readable by everyone (it holds public keys only), written atomically, and refused
when another user could have written it: the release keys it names are what the host trusts.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from agent_daemon.disk.atomic_file import write_bytes_atomically
from agent_daemon.errors import DaemonStateError
from ground.planted_files import NotRegularFile, open_regular

__all__ = [
    "MAX_TRUST_ROOT_FILE_BYTES",
    "TRUST_ROOT_FILE_NAME",
    "HeldTrustRoot",
    "HeldTrustRootFile",
]

TRUST_ROOT_FILE_NAME = "trust_root.json"
# TUF's name for the role whose keys sign what gets installed: here, the release manifests.
_RELEASE_ROLE = "targets"
# The stored file was bounded when it was verified; a bigger one was not written by the agent.
MAX_TRUST_ROOT_FILE_BYTES = 512 * 1024
_RAW_KEY_HEX_DIGITS = 64


@dataclass(frozen=True, kw_only=True)
class HeldTrustRoot:
    """What the host needs of its held root without `tuf`: which version, until when, and the
    release keys (key id, sha256 of the raw key → the raw 32-byte Ed25519 key)."""

    version: int
    expires: datetime
    release_keys: Mapping[str, bytes]
    body: bytes

    def is_expired(self, now: datetime) -> bool:
        return now >= self.expires


class HeldTrustRootFile:
    def __init__(self, path: Path, *, daemon_uid: int | None = None) -> None:
        """`daemon_uid` is the user the daemon runs as (default: this process's); `agent status`
        run by root names the non-root daemon's, whose file it reads and only shows."""
        self.path = path
        self._daemon_uid = daemon_uid

    def load(self) -> HeldTrustRoot | None:
        """The held root, None when this host holds none (it trusts its key files);
        `DaemonStateError` naming the file when it cannot be used."""
        # Not through a link, and without waiting on a named pipe: the daemon's user may own the
        # state directory while root reads it (`status`, `diagnose`).
        try:
            opened = open_regular(self.path, follow_links=False)
        except FileNotFoundError:
            return None
        except NotRegularFile as exc:
            raise DaemonStateError(f"{self.path}: {exc.strerror}") from exc
        except OSError as exc:
            raise DaemonStateError(f"{self.path}: cannot be read ({exc.strerror})") from exc
        with opened:
            return self._checked(opened)

    def _checked(self, opened: BinaryIO) -> HeldTrustRoot:
        info = os.fstat(opened.fileno())
        daemon_uid = os.geteuid() if self._daemon_uid is None else self._daemon_uid
        if info.st_mode & 0o022 or info.st_uid not in {0, daemon_uid}:
            raise DaemonStateError(
                f"{self.path}: mode {stat.S_IMODE(info.st_mode):04o}, owner uid {info.st_uid}; "
                "the trust root names the keys this host trusts, so it must be owned by root or "
                f"the daemon's user (uid {daemon_uid}) and not writable by group or others"
            )
        if info.st_size > MAX_TRUST_ROOT_FILE_BYTES:
            raise DaemonStateError(
                f"{self.path}: {info.st_size} bytes, at most {MAX_TRUST_ROOT_FILE_BYTES} expected"
            )
        try:
            body = opened.read(MAX_TRUST_ROOT_FILE_BYTES + 1)
        except OSError as exc:
            raise DaemonStateError(f"{self.path}: cannot be read ({exc.strerror})") from exc
        try:
            return _parsed(body)
        except (ValueError, KeyError, TypeError) as exc:
            raise DaemonStateError(f"{self.path}: not a usable trust root ({exc})") from exc

    def save(self, body: bytes) -> None:
        """Replace the held root with a verified one (the caller verified it)."""
        write_bytes_atomically(self.path, body, mode=0o644)


def _parsed(body: bytes) -> HeldTrustRoot:
    document = json.loads(body)
    signed: dict[str, Any] = document["signed"]
    if signed.get("_type") != "root":
        raise ValueError(f"_type {signed.get('_type')!r}, expected 'root'")
    version = signed["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version {version!r}, expected a positive integer")
    expires = datetime.fromisoformat(signed["expires"])
    if expires.utcoffset() is None:
        raise ValueError(f"expires {signed['expires']!r} has no time zone")
    keys: dict[str, bytes] = {}
    for keyid in signed["roles"][_RELEASE_ROLE]["keyids"]:
        public = signed["keys"][keyid]["keyval"]["public"]
        if not isinstance(public, str) or len(public) != _RAW_KEY_HEX_DIGITS:
            raise ValueError(f"key {keyid}: keyval.public is not 64 hex digits")
        raw = bytes.fromhex(public)
        keys[hashlib.sha256(raw).hexdigest()] = raw
    if not keys:
        raise ValueError(f"role {_RELEASE_ROLE!r} names no release key")
    return HeldTrustRoot(
        version=version, expires=expires.astimezone(UTC), release_keys=keys, body=body
    )
