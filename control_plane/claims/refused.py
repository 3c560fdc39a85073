"""The refusals a claim is answered with: the caps, the operators' brake, a consumed slot, a
pair without a release (their codes, statuses and whether each consumes the slot:
`ground.contract.RefusalCode`)."""

from __future__ import annotations

from datetime import datetime

from control_plane.claims.slots import retry_after_seconds
from control_plane.errors import ClaimRefused
from ground.contract import RefusalCode, ReleaseTrack

__all__ = [
    "brake_on",
    "global_cap_full",
    "no_release",
    "org_cap_full",
    "refuse_when_full",
    "slot_consumed",
]


def _cap_full(code: RefusalCode, now: datetime, message: str) -> ClaimRefused:
    return ClaimRefused(
        code, message, reason=code.value, retry_after_seconds=retry_after_seconds(now)
    )


def org_cap_full(now: datetime, org_cap: int) -> ClaimRefused:
    message = f"this organisation's {org_cap} updates for this minute are taken"
    return _cap_full(RefusalCode.ORG_CAP, now, message)


def global_cap_full(now: datetime, global_cap: int) -> ClaimRefused:
    message = f"the platform's {global_cap} updates for this minute are taken"
    return _cap_full(RefusalCode.GLOBAL_CAP, now, message)


def refuse_when_full(
    now: datetime, org_cap: int, global_cap: int, org_granted: int | None, granted: int | None
) -> None:
    """The caps' refusals, the organisation's first, for counts known to be at least these."""
    if (org_granted or 0) >= org_cap:
        raise org_cap_full(now, org_cap)
    if (granted or 0) >= global_cap:
        raise global_cap_full(now, global_cap)


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
