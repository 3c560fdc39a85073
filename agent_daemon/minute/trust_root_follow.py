"""The trust root, followed with the config poll: every poll tells the control plane the version
held; when the config names a newer one, the chain is walked to it, one version at a time.

Each version is fetched through the agent's one HTTP client (its proxy, CA, pin and client
certificate) and verified by the root held before it — a threshold of the held root's root keys
and of its own (`signed_release.trust_root.next_trust_root`); a host that holds none yet accepts
version 1 only when one of its trusted-key files signed it too (`first_trust_root`). Each verified
version is stored before the next is fetched, so a daemon killed mid-walk keeps every step it
verified. One poll takes at most `MAX_ROOT_STEPS` versions; the rest come with the next.

Nothing here stops the minute: a refused or unreachable root is one warning per version (its
reason, no traceback), the held root stays in force, and the poll goes on to the schedule and the
offers. `tuf` is imported only when a newer root is announced: an idle daemon never loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.disk.held_trust_root import HeldTrustRoot, HeldTrustRootFile
from agent_daemon.errors import ControlPlaneError, DaemonStateError
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.daemon_lines import error_fields
from ground.instants import format_instant

if TYPE_CHECKING:
    from signed_release.trust_root import TrustRoot

__all__ = ["TrustRootFollower"]


class TrustRootFollower:
    def __init__(
        self,
        *,
        control: ControlPlaneClient,
        held_file: HeldTrustRootFile,
        legacy_release_keys: Mapping[str, bytes],
        log: EventLog,
        expiry_now: Callable[[], datetime],
    ) -> None:
        self._control = control
        self._file = held_file
        self._legacy = dict(legacy_release_keys)
        self._log = log
        # The updater's reference time: a root's expiry is judged as the updater judges it.
        self._expiry_now = expiry_now
        self._held: HeldTrustRoot | None = None
        self._loaded = False
        # (version, what went wrong) already said: one warning each, not one a minute.
        self._warned: set[tuple[int | None, str]] = set()
        self._expiry_warned: int | None = None

    def held_version(self) -> int | None:
        """The version held, told with every poll; None while none is (or its file is unusable:
        the control plane then offers version 1, which this host refuses unless it qualifies)."""
        held = self._load()
        return None if held is None else held.version

    def follow(self, announced: int | None) -> None:
        """Walk from the held root towards `announced` (the config's newest published version).
        Never raises: every failure is a log line, and the held root stays."""
        try:
            self._follow(announced)
        except (OSError, DaemonStateError) as exc:
            self._warn_once("trust_root.store_failed", None, **error_fields(exc))
        except Exception as exc:
            # A defect, or a root nobody imagined: it must not cost the minute its schedule and
            # offers, every minute from now on. The held root stays.
            self._warn_once("trust_root.crashed", announced, **error_fields(exc))

    def _load(self) -> HeldTrustRoot | None:
        """The held root as its file says now: read at every poll, since the updater reads the
        file each time it verifies — a file put back to an older version (a restored backup) is
        what the next release would be verified with, so it is said and walked forward again,
        and the control plane is told the version the file holds."""
        try:
            held = self._file.load()
        except DaemonStateError as exc:
            self._warn_once("trust_root.unusable", None, **error_fields(exc))
            self._loaded = False
            return None
        before = self._held if self._loaded else None
        if before is not None and (held is None or held.version < before.version):
            self._log.emit(
                "trust_root.went_back",
                level="warning",
                held=before.version,
                on_disk=None if held is None else held.version,
                file=str(self._file.path),
                detail="the held trust root's file was replaced by an older version (or removed) "
                "since this daemon stored it; the chain is walked forward again from it",
            )
        self._held = held
        self._loaded = True
        return held

    def _follow(self, announced: int | None) -> None:
        held = self._load()
        if not self._loaded:
            return
        if announced is None or (held is not None and announced <= held.version):
            if held is not None:
                self._say_if_expired(held)
            return
        # Only now: an idle daemon, whose root is current, never imports `tuf`.
        from signed_release.errors import TrustRootError
        from signed_release.trust_root import (
            MAX_ROOT_BYTES,
            MAX_ROOT_STEPS,
            first_trust_root,
            next_trust_root,
            read_trust_root,
        )

        try:
            trusted: TrustRoot | None = None if held is None else read_trust_root(held.body)
        except TrustRootError as exc:
            self._warn_once("trust_root.unusable", None, **error_fields(exc))
            return
        for _ in range(MAX_ROOT_STEPS):
            version = 1 if trusted is None else trusted.version + 1
            if version > announced:
                break
            try:
                data = self._control.fetch_trust_root(version, max_bytes=MAX_ROOT_BYTES)
            except ControlPlaneError as exc:
                self._warn_once("trust_root.unavailable", version, **error_fields(exc))
                break
            if data is None:
                # Announced but not served (yet): a replica behind the others; next poll.
                break
            try:
                if trusted is None:
                    trusted = first_trust_root(data, self._legacy)
                else:
                    trusted = next_trust_root(trusted, data)
            except TrustRootError as exc:
                self._warn_once(
                    "trust_root.refused",
                    version,
                    held=None if trusted is None else trusted.version,
                    **error_fields(exc),
                )
                break
            self._keep(trusted)
        if self._held is not None:
            self._say_if_expired(self._held)

    def _keep(self, root: TrustRoot) -> None:
        # Stored before the next version is fetched: a crash mid-walk keeps every verified step.
        self._file.save(root.body)
        self._held = HeldTrustRoot(
            version=root.version,
            expires=root.expires,
            release_keys=dict(root.release_keys),
            body=root.body,
        )
        self._log.emit(
            "trust_root.updated",
            version=root.version,
            expires=format_instant(root.expires),
            release_keys=sorted(root.release_keys),
        )

    def _say_if_expired(self, held: HeldTrustRoot) -> None:
        now = self._expiry_now()
        if not held.is_expired(now) or self._expiry_warned == held.version:
            return
        self._expiry_warned = held.version
        self._log.emit(
            "trust_root.expired",
            level="warning",
            version=held.version,
            expired_at=format_instant(held.expires),
            detail="no release is accepted until the operators publish a newer trust root",
        )

    def _warn_once(self, event: str, version: int | None, **fields: object) -> None:
        """One warning per (event, version): a root refused each minute is said once."""
        key = (version, event)
        if key in self._warned:
            return
        self._warned.add(key)
        self._log.emit(event, level="warning", version=version, **fields)
