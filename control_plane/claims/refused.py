"""The refusals a claim is answered with: the operators' brake, a hold, a stopped or rolled-back
release, a consumed slot, a pair without a release (the caps' are `claims.caps`; their codes,
statuses and whether each consumes the slot: `ground.contract.RefusalCode`)."""

from __future__ import annotations

from uuid import UUID

from control_plane.errors import ClaimRefused
from control_plane.pins.holds import ActiveHold
from ground.contract import MissReason, RefusalCode, ReleaseTrack, format_instant

__all__ = [
    "brake_on",
    "held",
    "no_release",
    "nothing_pinned",
    "release_halted",
    "release_rolled_back",
    "slot_consumed",
]


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


def held(hold: ActiveHold, slot_key: str) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.HELD,
        f"this agent is held until {format_instant(hold.until)} (set by {hold.set_by}):"
        f" slot {slot_key} is skipped",
        reason=MissReason.HELD.value,
    )


def release_halted(
    version: str, channel: str, platform: str, why: str, slot_key: str
) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.RELEASE_HALTED,
        f"release {version} of {channel}/{platform} is {why}; slot {slot_key} is skipped",
        reason=f"{why}; slot {slot_key} is skipped",
    )


def release_rolled_back(version: str, rolled_back_run: UUID, slot_key: str) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.RELEASE_ROLLED_BACK,
        f"this host rolled release {version} back (run {rolled_back_run}): nothing to do until a"
        " newer release is published for its channel and platform, or an operator asks for a"
        " retry",
        slot_key=slot_key,
    )
