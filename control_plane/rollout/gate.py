"""The claim's rollout checks, called by `control_plane.claims` (one call per check there).

check_scheduled_claim   a held agent's slot is skipped (HELD: consumes the slot, recorded as a
                        `missed` run with the reason `held`, no token taken); an offered
                        release that is halted or braked is refused (RELEASE_HALTED: retry)
release_for_grant       inside the grant's transaction: the offered release, its row held
                        FOR SHARE so a halt or a release brake waits for the grants in flight
                        (and then revokes their tokens), re-checked under that lock
check_manual_claim      a manual update of a release under the platform's brake, a halt or
                        its brake is refused unless an operator forced it
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.errors import ClaimRefused
from control_plane.pins.holds import active_hold
from control_plane.rollout.offer import Offer, offered_release
from control_plane.types import Connection
from ground.contract import MissReason, RefusalCode, ReleaseTrack, format_instant

__all__ = ["check_manual_claim", "check_scheduled_claim", "note_track", "release_for_grant"]


def note_track(conn: Connection, agent_id: UUID, track: ReleaseTrack, now: datetime) -> None:
    """Remember the pair the agent claims for (the panel's API shows it); written only when it
    changed."""
    conn.execute(
        "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
        " SELECT %(agent)s, %(channel)s, %(platform)s, %(now)s WHERE NOT EXISTS ("
        "  SELECT 1 FROM agent_tracks WHERE agent_id = %(agent)s AND channel = %(channel)s"
        "  AND platform = %(platform)s)"
        " ON CONFLICT (agent_id) DO UPDATE SET channel = EXCLUDED.channel,"
        " platform = EXCLUDED.platform, seen_at = EXCLUDED.seen_at",
        {"agent": agent_id, "channel": track.channel, "platform": track.platform, "now": now},
    )


def _halted(track: ReleaseTrack, release: dict[str, Any], why: str) -> ClaimRefused:
    return ClaimRefused(
        RefusalCode.RELEASE_HALTED,
        f"release {release['agent_version']} of {track.channel}/{track.platform} is {why}",
        reason=why,
    )


def check_scheduled_claim(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    track: ReleaseTrack,
    now: datetime,
) -> Offer:
    """Raise HELD or RELEASE_HALTED for a scheduled claim that saw room in the caps; else the
    offer it was judged by (the claim's next check asks about the same release)."""
    note_track(conn, agent_id, track, now)
    hold = active_hold(conn, agent_id, now)
    if hold is not None:
        # The slot is consumed without a token: the run says so, and the agent stops asking.
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,"
            " created_at) VALUES (%s, %s, 'schedule', %s, %s, 'missed', %s, %s)"
            " ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule' DO NOTHING",
            [agent_id, org_id, slot_key, slot_at, MissReason.HELD.value, now],
        )
        raise ClaimRefused(
            RefusalCode.HELD,
            f"this agent is held until {format_instant(hold.until)} (set by {hold.set_by}):"
            f" slot {slot_key} is skipped",
            reason=MissReason.HELD.value,
        )
    offer = offered_release(conn, agent_id=agent_id, org_id=org_id, track=track)
    why = offer.stopped_reason
    if why is not None:
        assert offer.release is not None
        raise _halted(track, offer.release, why)
    return offer


def release_for_grant(
    conn: Connection, *, agent_id: UUID, org_id: UUID, track: ReleaseTrack
) -> dict[str, Any] | None:
    """The release to grant (see the module's docstring); None when nothing is offered."""
    offer = offered_release(conn, agent_id=agent_id, org_id=org_id, track=track)
    if offer.release is None:
        return None
    locked: dict[str, Any] | None = conn.execute(
        "SELECT rel.id, rel.agent_version, rel.manifest_version, rel.braked_at,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = rel.id"
        "   AND h.resumed_at IS NULL) AS halted"
        " FROM releases rel WHERE rel.id = %s FOR SHARE",
        [offer.release["id"]],
    ).fetchone()
    assert locked is not None
    if locked["halted"] or locked["braked_at"] is not None:
        raise _halted(track, offer.release, "halted or under its brake")
    return locked


def check_manual_claim(
    conn: Connection, *, run_id: UUID, release: dict[str, Any], track: ReleaseTrack
) -> None:
    """Refuse a manual update of `release` while the platform's brake, a halt or the release's
    own brake covers it, unless an operator forced this update (`forced_updates`)."""
    row = conn.execute(
        "SELECT (SELECT engaged FROM platform_brake) AS brake,"
        " (SELECT reason FROM platform_brake) AS brake_reason,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = %(release)s"
        "   AND h.resumed_at IS NULL) AS halted,"
        " (SELECT braked_at IS NOT NULL FROM releases WHERE id = %(release)s) AS braked,"
        " EXISTS (SELECT 1 FROM forced_updates WHERE run_id = %(run)s) AS forced",
        {"release": release["id"], "run": run_id},
    ).fetchone()
    assert row is not None
    if row["forced"]:
        return
    if row["brake"]:
        raise ClaimRefused(
            RefusalCode.BRAKE,
            "updates are stopped by the operators' brake"
            f" ({row['brake_reason']}); only an operator can force this update",
            reason=row["brake_reason"],
        )
    if row["halted"] or row["braked"]:
        raise _halted(track, release, "halted or under its brake; only an operator can force it")
