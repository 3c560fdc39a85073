"""What publishing a trust root says about the releases it leaves unverifiable: live (not
withdrawn) releases signed by a key the root does not name, which agents following it refuse.

Finding them reads the rollout (which release is current, which one a canary rollout offers
the hosts it has not reached): that is `control_plane.rollout.unverifiable`, handed to
`TrustRootService` when it is made, so this folder does not import the ones above it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal
from uuid import UUID

from control_plane.types import Connection

__all__ = ["FindUnverifiable", "OfferedAs", "UnverifiableRelease"]

# current: the pair's current release; previous: offered to the hosts the canary rollout has not
# reached yet; stored: offered only to hosts pinned to its version, or kept for a rollback.
OfferedAs = Literal["current", "previous", "stored"]


@dataclass(frozen=True, kw_only=True)
class UnverifiableRelease:
    release_id: UUID
    product: str
    channel: str
    platform: str
    version: str
    manifest_version: int
    key_id: str
    offered_as: OfferedAs
    what_to_do: str
    commands: tuple[str, ...]  # to run, in this order or as alternatives (`what_to_do` says)


# The live releases signed by a key not among the given release key ids, inside the caller's
# transaction (`control_plane.rollout.unverifiable.unverifiable_releases`).
FindUnverifiable = Callable[[Connection, frozenset[str]], tuple[UnverifiableRelease, ...]]
