"""The brake's second scope: one release. Claims of it are refused (`RefusalCode.RELEASE_HALTED`,
the brake per release), its outstanding tokens revoked, and a manual update to it refused unless
an operator forces it — the platform's brake (`platform_brake`) covers every release the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from control_plane.errors import Conflict
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import plain_text, required_text
from control_plane.releases.release_actions import (
    release_facts,
    release_row,
    revoke_release_tokens,
)
from control_plane.types import Connection
from ground.contract import Instant

__all__ = ["ReleaseBrake", "set_release_brake"]


@dataclass(frozen=True, kw_only=True)
class ReleaseBrake:
    release_id: UUID
    version: str
    channel: str
    platform: str
    engaged: bool
    reason: str | None
    changed_at: Instant
    revoked_tokens: int


def set_release_brake(
    conn: Connection,
    release_id: UUID,
    *,
    engaged: bool,
    reason: object,
    limit: int,
    actor: Actor,
    now: datetime,
) -> ReleaseBrake:
    """Engage (reason required) or release one release's brake, inside the caller's transaction."""
    reason_text = (
        required_text(
            "reason", reason, limit, required_to="engage a release's brake (say why it stops)"
        )
        if engaged
        else plain_text("reason", reason, limit)
    )
    # The row lock waits for grants in flight (they hold the release FOR SHARE). A withdrawn
    # release is offered to no host: its brake is only released, never engaged.
    row = conn.execute(
        "UPDATE releases SET braked_at = %s, brake_reason = %s, braked_by = %s WHERE id = %s"
        " AND (withdrawn_at IS NULL OR NOT %s) RETURNING agent_version, channel, platform",
        [
            now if engaged else None,
            reason_text if engaged else None,
            (actor.name or actor.kind) if engaged else None,
            release_id,
            engaged,
        ],
    ).fetchone()
    if row is None:
        withdrawn = release_row(conn, release_id, "agent_version")
        raise Conflict(
            f"release {release_id} ({withdrawn['agent_version']}) is withdrawn: no host is offered"
            " it, so there is nothing to brake",
            code="release_withdrawn",
        )
    revoked = revoke_release_tokens(conn, release_id, because="brake", now=now) if engaged else 0
    record_action(
        conn,
        kind="brake.engaged" if engaged else "brake.released",
        actor=actor,
        at=now,
        data={
            "scope": "release",
            **release_facts(release_id, row),
            "reason": reason_text if engaged else None,
            "revoked_tokens": revoked,
        },
    )
    return ReleaseBrake(
        release_id=release_id,
        version=row["agent_version"],
        channel=row["channel"],
        platform=row["platform"],
        engaged=engaged,
        reason=reason_text if engaged else None,
        changed_at=now,
        revoked_tokens=revoked,
    )
