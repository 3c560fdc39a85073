"""The operators' emergency brake: stops every update without touching a customer's setting.
Engaging it refuses new claims, scheduled and manual, and can revoke the outstanding tokens of
both (a revoked token downloads nothing more and is refused the swap); an update an operator
forced goes on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from control_plane.brake.release_brake import ReleaseBrake, set_release_brake
from control_plane.errors import NotFound
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import plain_text, required_text
from control_plane.seeded_rows import seeded_row
from control_plane.types import Connection, Pool
from ground.contract import Instant

__all__ = [
    "BrakeChange",
    "BrakeService",
    "BrakeState",
    "ReleaseBrake",
    "RevokedToken",
    "brake_state",
]

# The reason agents are shown in their config while the brake is on.
MAX_REASON_LENGTH = 500


@dataclass(frozen=True, kw_only=True)
class BrakeState:
    engaged: bool
    reason: str | None
    changed_at: Instant | None


@dataclass(frozen=True, kw_only=True)
class BrakeChange(BrakeState):
    """The brake after a change, and how many outstanding tokens the change revoked."""

    revoked_tokens: int


@dataclass(frozen=True, kw_only=True)
class RevokedToken:
    token_id: UUID
    run_id: UUID
    revoked_at: Instant
    reason: str | None


def brake_state(conn: Connection) -> BrakeState:
    row = seeded_row(conn, "SELECT engaged, reason, changed_at FROM platform_brake")
    return BrakeState(engaged=row["engaged"], reason=row["reason"], changed_at=row["changed_at"])


class BrakeService:
    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    def get(self) -> BrakeState:
        with self._pool.connection() as conn:
            return brake_state(conn)

    def set(
        self,
        *,
        engaged: bool,
        reason: str | None,
        revoke_outstanding: bool,
        actor: Actor,
        now: datetime,
    ) -> BrakeChange:
        # Every agent shows the reason while the brake holds, and the trail keeps it: a stop
        # nobody can explain is the silent halt the brake exists to replace.
        reason = (
            required_text(
                "reason",
                reason,
                MAX_REASON_LENGTH,
                required_to="engage the brake (say why updates stop)",
            )
            if engaged
            else plain_text("reason", reason, MAX_REASON_LENGTH)
        )
        revoked = 0
        with self._pool.connection() as conn, conn.transaction():
            # The UPDATE's row lock waits for grants in flight (they hold it FOR SHARE), so the
            # revocation below sees every token granted before the brake.
            conn.execute(
                "UPDATE platform_brake SET engaged = %s, reason = %s, changed_at = %s,"
                " changed_by = %s",
                [engaged, reason if engaged else None, now, actor.id],
            )
            if engaged and revoke_outstanding:
                # Scheduled and manual alike: a download under way is refused from now on,
                # and so is its swap. Only an update an operator forced goes on.
                revoked = conn.execute(
                    "UPDATE tokens t SET revoked_at = %s, revoked_reason = 'brake'"
                    " FROM runs r WHERE r.id = t.run_id AND r.status = 'claimed'"
                    " AND t.revoked_at IS NULL AND t.expires_at > %s"
                    " AND NOT EXISTS (SELECT 1 FROM forced_updates f WHERE f.run_id = r.id)",
                    [now, now],
                ).rowcount
            state = brake_state(conn)
            record_action(
                conn,
                kind="brake.engaged" if engaged else "brake.released",
                actor=actor,
                at=now,
                data={"reason": state.reason, "revoked_tokens": revoked},
            )
        return BrakeChange(
            engaged=state.engaged,
            reason=state.reason,
            changed_at=state.changed_at,
            revoked_tokens=revoked,
        )

    def set_release(
        self,
        release_id: UUID,
        *,
        engaged: bool,
        reason: str | None,
        actor: Actor,
        now: datetime,
    ) -> ReleaseBrake:
        """The brake of one release (`brake.release_brake`)."""
        with self._pool.connection() as conn, conn.transaction():
            return set_release_brake(
                conn,
                release_id,
                engaged=engaged,
                reason=reason,
                limit=MAX_REASON_LENGTH,
                actor=actor,
                now=now,
            )

    def revoke_token(
        self, token_id: UUID, *, now: datetime, actor: Actor | None = None
    ) -> RevokedToken:
        with self._pool.connection() as conn, conn.transaction():
            row = conn.execute(
                "UPDATE tokens SET revoked_at = coalesce(revoked_at, %s),"
                " revoked_reason = coalesce(revoked_reason, 'operator')"
                " WHERE id = %s RETURNING id, run_id, revoked_at, revoked_reason",
                [now, token_id],
            ).fetchone()
            if row is None:
                raise NotFound(f"token {token_id} does not exist", code="token_not_found")
            record_action(
                conn,
                kind="token.revoked",
                actor=actor or Actor(kind="operator"),
                at=now,
                data={"token_id": str(token_id), "run_id": str(row["run_id"])},
            )
        return RevokedToken(
            token_id=row["id"],
            run_id=row["run_id"],
            revoked_at=row["revoked_at"],
            reason=row["revoked_reason"],
        )
