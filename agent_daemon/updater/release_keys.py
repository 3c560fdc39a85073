"""Which release keys an update is verified with, decided when the update runs.

A host that holds a trust root trusts that root's release keys and nothing else — not its key
files — and the file is read again for every update: a root that dropped a compromised key refuses
a release signed only by it from then on, even one offered before. A root that has expired (by the
updater's reference time) vouches for no key at all, until its successor is fetched. A host that
holds none trusts its key files, as before roots existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from agent_daemon.errors import (
    DaemonStateError,
    ExpiredTrustRoot,
    ReleaseRefused,
    UnusableTrustRoot,
)
from agent_daemon.updater.trusted_keys import TrustedKeys
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_state import UpdaterState
from ground.instants import format_instant

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["floor_now", "trusted_release_keys"]


def trusted_release_keys(
    settings: UpdaterSettings, now: datetime
) -> Mapping[str, Ed25519PublicKey]:
    """The keys a release must be signed by at `now`; `ReleaseRefused` kinds when there are none
    to trust (the held root expired or unreadable)."""
    if settings.trust_root_file is None:
        return settings.trusted_keys
    try:
        held = HeldTrustRootFile(settings.trust_root_file).load()
    except DaemonStateError as exc:
        raise UnusableTrustRoot(f"release refused: the held trust root is unusable: {exc}") from exc
    if held is None:
        return settings.trusted_keys
    if held.is_expired(now):
        raise ExpiredTrustRoot(
            f"release refused: trust root v{held.version} expired at "
            f"{format_instant(held.expires)} (now {format_instant(now)}): no release is accepted "
            "until the operators publish a newer trust root"
        )
    return TrustedKeys(held.release_keys)


def floor_now(state: UpdaterState, settings: UpdaterSettings, now: datetime) -> int | None:
    """The rollback floor under the keys trusted at `now` (`UpdaterState.floor_for`); with none to
    trust (an expired or unusable root), the highest accepted: nothing is installed then anyway."""
    try:
        trusted = trusted_release_keys(settings, now)
    except ReleaseRefused:
        return state.floor
    return state.floor_for(trusted)
