"""The refusals a claim is answered with: the operators' brake, a consumed slot, a pair without
a release (the caps' are `claims.caps`; their codes, statuses and whether each consumes the
slot: `ground.contract.RefusalCode`)."""

from __future__ import annotations

from control_plane.errors import ClaimRefused
from ground.contract import RefusalCode, ReleaseTrack

__all__ = ["brake_on", "no_release", "nothing_pinned", "slot_consumed"]


def brake_on(reason: str | None) -> ClaimRefused:
    why = f": {reason}" if reason else ""
    return ClaimRefused(
        RefusalCode.BRAKE,
        f"scheduled updates are stopped by the operators' brake{why}",
        reason=reason,
    )


def slot_consumed(slot_key: str, why: str) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.SLOT_CONSUMED, f"slot_key: {slot_key!r} {why}", slot_key=slot_key
    )


def no_release(track: ReleaseTrack) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.NO_RELEASE,
        f"no release is current for channel {track.channel!r} on platform {track.platform!r}",
    )


def nothing_pinned(track: ReleaseTrack) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.NO_RELEASE,
        f"this agent is pinned to a version with no release for channel {track.channel!r}"
        f" on platform {track.platform!r}: nothing is offered",
    )
