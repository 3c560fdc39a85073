"""The claim's rollout checks, called by `control_plane.claims` (one call per check there).

record_held_slot        a held agent's slot, refused HELD (`claims.decision`), is consumed
                        by a `missed` run with the reason `held` (no token taken)
skip_stopped_slot       an offered release that is halted or braked, refused RELEASE_HALTED,
                        consumes the slot with a `skipped` run (the next slot asks again)
release_for_grant       inside the grant's transaction: the offered release, its row held
                        FOR SHARE so a halt or a release brake waits for the grants in flight
                        (and then revokes their tokens), re-checked under that lock
release_for_manual      a manual update ("update now") takes the same offer; the platform's
                        brake, a hold, a halt or the release's brake refuses it unless an
                        operator forced it (the force is the one way past, named in the grant's
                        event)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.errors import ClaimRefused
from control_plane.events.services import record_event
from control_plane.pins.holds import active_hold
from control_plane.releases.products import Product
from control_plane.releases.services import current_release
from control_plane.rollout.offer import Offer, OfferBasis, offered_release
from control_plane.types import Connection
from ground.contract import MissReason, RefusalCode, ReleaseTrack, format_instant

__all__ = [
    "ForcedBy",
    "ManualRelease",
    "note_track",
    "record_held_slot",
    "record_skipped_slot",
    "release_for_grant",
    "release_for_manual",
    "skip_stopped_slot",
]


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


def record_held_slot(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    now: datetime,
) -> None:
    """The slot of a held agent consumed without a token: the run says so, and the agent stops
    asking (nothing when the slot already has a run)."""
    conn.execute(
        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,"
        " created_at) VALUES (%s, %s, 'schedule', %s, %s, 'missed', %s, %s)"
        " ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule' DO NOTHING",
        [agent_id, org_id, slot_key, slot_at, MissReason.HELD.value, now],
    )


# What stops a release now: a halt (by an operator or on its failures; undone by a resume) before
# its own brake (undone by releasing it), as `rollout.offer.Offer.stopped_reason` says them.
_STOPPED_BY = """
SELECT CASE WHEN EXISTS (SELECT 1 FROM release_halts halt
                          WHERE halt.release_id = rel.id AND halt.resumed_at IS NULL)
            THEN 'halt'
            WHEN rel.braked_at IS NOT NULL THEN 'brake' END AS stopped_by
  FROM releases rel WHERE rel.id = %s
"""


def skip_stopped_slot(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    release: dict[str, Any],
    why: str,
    now: datetime,
) -> None:
    """Consume the slot with a `skipped` run (and its event): a stopped release is nothing to do
    tonight. Asking again every minute until the window closes would only load the control plane
    with refusals, and a halt is lifted by a person, rarely within the window; the next slot asks
    again. An agent that does not yet know this refusal consumes the slot asks once more and is
    answered `release_halted` again while the halt lasts (still this one run).

    The agent is answered `release_halted` whatever stopped the release; the run and its event
    keep which (`stopped_by`: `halt` or `brake`, read from the release as the slot is consumed),
    since the customer and the operators undo them differently. None when neither holds any more
    (resumed or released meanwhile): the run then says "halted, or paused by its own brake"."""
    row = conn.execute(_STOPPED_BY, [release["id"]]).fetchone()
    stopped_by = None if row is None else row["stopped_by"]
    record_skipped_slot(
        conn,
        agent_id=agent_id,
        org_id=org_id,
        slot_key=slot_key,
        slot_at=slot_at,
        reason=RefusalCode.RELEASE_HALTED,
        release=release,
        now=now,
        details={"stopped": why, **({"stopped_by": stopped_by} if stopped_by else {})},
        stopped_by=stopped_by,
    )


def record_skipped_slot(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    slot_key: str,
    slot_at: datetime,
    reason: RefusalCode,
    release: dict[str, Any],
    now: datetime,
    from_version: str | None = None,
    details: dict[str, str] | None = None,
    stopped_by: str | None = None,
) -> None:
    """The slot consumed by a `skipped` run of the offered release, with its `update.skipped`
    event (the schedule's act) carrying `details`; nothing when the slot already has a run.
    `stopped_by`: what stopped the release (`halt`, `brake`), for a `release_halted` skip."""
    with conn.transaction():
        run = conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, skip_reason,"
            " release_id, from_version, version, created_at, finished_at, stopped_by)"
            " VALUES (%s, %s, 'schedule', %s, %s, 'skipped', %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule' DO NOTHING"
            " RETURNING id",
            [
                agent_id,
                org_id,
                slot_key,
                slot_at,
                reason.value,
                release["id"],
                from_version,
                from_version,
                now,
                now,
                stopped_by,
            ],
        ).fetchone()
        if run is not None:
            record_event(
                conn,
                org_id=org_id,
                agent_id=agent_id,
                run_id=run["id"],
                kind="update.skipped",
                actor_kind="schedule",
                at=now,
                data={
                    "slot_key": slot_key,
                    "reason": reason.value,
                    "release_version": release["agent_version"],
                    **(details or {}),
                },
            )


def _locked_offer(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    track: ReleaseTrack,
    product: Product = "agent",
) -> tuple[Offer, dict[str, Any] | None]:
    """The agent's offer, and its release's row held FOR SHARE (id, agent_version,
    manifest_version, braked_at, halted) so a halt or a release brake waits for this grant and
    then revokes its token; None when nothing is offered."""
    offer = offered_release(conn, agent_id=agent_id, org_id=org_id, track=track, product=product)
    if offer.release is None:
        return offer, None
    locked: dict[str, Any] | None = conn.execute(
        "SELECT rel.id, rel.agent_version, rel.manifest_version, rel.braked_at,"
        " EXISTS (SELECT 1 FROM release_halts h WHERE h.release_id = rel.id"
        "   AND h.resumed_at IS NULL) AS halted"
        " FROM releases rel WHERE rel.id = %s FOR SHARE",
        [offer.release["id"]],
    ).fetchone()
    assert locked is not None
    return offer, locked


def release_for_grant(
    conn: Connection,
    *,
    agent_id: UUID,
    org_id: UUID,
    track: ReleaseTrack,
    product: Product = "agent",
) -> dict[str, Any] | None:
    """The release of `product` to grant (see the module's docstring); None when nothing is
    offered."""
    offer, locked = _locked_offer(
        conn, agent_id=agent_id, org_id=org_id, track=track, product=product
    )
    if offer.release is None or locked is None:
        return None
    if locked["halted"] or locked["braked_at"] is not None:
        raise _halted(track, offer.release, "halted or under its brake")
    return locked


@dataclass(frozen=True, kw_only=True)
class ForcedBy:
    """An operator's force of one manual update (`forced_updates`)."""

    operator: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class ManualRelease:
    """What a manual update is granted: the agent's offer (None: nothing is offered, e.g. a pin
    to a version without a release), and the force that let it past a stop (None: nothing
    stopped it)."""

    release: dict[str, Any] | None
    basis: OfferBasis | None
    forced: ForcedBy | None


def release_for_manual(
    conn: Connection,
    *,
    run_id: UUID,
    agent_id: UUID,
    org_id: UUID,
    track: ReleaseTrack,
    now: datetime,
) -> ManualRelease:
    """The release a manual update ("update now") is granted, inside the claim's transaction:
    the same offer as a scheduled claim and the config poll (pins, the stage, withdrawals), and
    the same stops (the platform's brake, a hold, a halt, the release's brake), each refused
    unless an operator forced this update. The brake's row and the offered release are held FOR
    SHARE, as for a scheduled grant, so a brake or a halt engaged meanwhile waits for this
    grant and then revokes its token."""
    brake = conn.execute("SELECT engaged, reason FROM platform_brake FOR SHARE").fetchone()
    assert brake is not None
    force = conn.execute(
        "SELECT forced_by, reason FROM forced_updates WHERE run_id = %s", [run_id]
    ).fetchone()
    forced = (
        None if force is None else ForcedBy(operator=force["forced_by"], reason=force["reason"])
    )
    only_forced = "; only an operator can force this update"
    if forced is None and brake["engaged"]:
        raise ClaimRefused(
            RefusalCode.BRAKE,
            f"updates are stopped by the operators' brake ({brake['reason']}){only_forced}",
            reason=brake["reason"],
        )
    if forced is None:
        hold = active_hold(conn, agent_id, now)
        if hold is not None:
            raise ClaimRefused(
                RefusalCode.HELD,
                f"this agent is held until {format_instant(hold.until)} (set by"
                f" {hold.set_by}){only_forced}",
                reason=MissReason.HELD.value,
            )
    # The pair's pointer FOR SHARE: a withdrawal waits for this grant, then revokes its token.
    current_release(conn, track.channel, track.platform, for_grant=True)
    offer, locked = _locked_offer(conn, agent_id=agent_id, org_id=org_id, track=track)
    if offer.release is None or locked is None:
        return ManualRelease(release=None, basis=offer.basis, forced=forced)
    if forced is None and (locked["halted"] or locked["braked_at"] is not None):
        raise _halted(track, offer.release, f"halted or under its brake{only_forced}")
    return ManualRelease(release=locked, basis=offer.basis, forced=forced)
