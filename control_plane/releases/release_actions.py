"""What every operator action on one release shares, inside the caller's transaction: reading the
release (an unknown id is `release_not_found`), the facts its event names, and revoking the
tokens granted for it but not yet used.

A halt, a resume, a promotion, a release's brake and a withdrawal each did these three steps in
their own words; one home keeps the refusal, the event's facts and the revocation alike.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from control_plane.errors import NotFound
from control_plane.types import Connection

__all__ = [
    "mark_withdrawn",
    "release_facts",
    "release_not_found",
    "release_row",
    "revoke_release_tokens",
]

# Why a release's outstanding tokens were revoked (the tokens' `revoked_reason`).
RevokedBecause = Literal["brake", "halted", "withdrawn"]


def release_not_found(release_id: UUID) -> NotFound:
    return NotFound(f"release {release_id} does not exist", code="release_not_found")


def release_row(
    conn: Connection, release_id: UUID, columns: str, *, for_update: bool = False
) -> dict[str, Any]:
    """The release's `columns` (SQL, from the caller's constants), or `release_not_found`.

    `for_update` waits for the grants in flight (they hold the row FOR SHARE): a revocation
    after it sees their tokens, and later grants see the change."""
    lock = " FOR UPDATE" if for_update else ""
    row: dict[str, Any] | None = conn.execute(
        f"SELECT {columns} FROM releases WHERE id = %s{lock}",  # noqa: S608 - constant columns
        [release_id],
    ).fetchone()
    if row is None:
        raise release_not_found(release_id)
    return row


def release_facts(release_id: UUID, row: dict[str, Any]) -> dict[str, Any]:
    """The facts every event about a release names: the release, its version and its pair."""
    return {
        "release_id": str(release_id),
        "version": row["agent_version"],
        "channel": row["channel"],
        "platform": row["platform"],
    }


def revoke_release_tokens(
    conn: Connection, release_id: UUID, *, because: RevokedBecause, now: datetime
) -> int:
    """Revoke the release's tokens granted but not yet used (an expired one is left as it is);
    returns how many. A stop (a brake, a halt) spares the updates an operator forced through it;
    a withdrawal spares none."""
    return conn.execute(
        "UPDATE tokens SET revoked_at = %(now)s, revoked_reason = %(because)s"
        " WHERE release_id = %(release)s AND revoked_at IS NULL AND expires_at > %(now)s"
        " AND (%(because)s = 'withdrawn'"
        "   OR NOT EXISTS (SELECT 1 FROM forced_updates f WHERE f.run_id = tokens.run_id))",
        {"now": now, "because": because, "release": release_id},
    ).rowcount


def mark_withdrawn(
    conn: Connection,
    release_id: UUID,
    *,
    reason: str,
    by: str,
    now: datetime,
    revoke_tokens: bool = True,
) -> int:
    """Withdraw the release (never offered again) and, unless told not to, revoke its unused
    tokens; returns how many were revoked. What takes its place is the caller's (a withdrawal, a
    rollback, a signing)."""
    conn.execute(
        "UPDATE releases SET withdrawn_at = %s, withdrawn_reason = %s, withdrawn_by = %s"
        " WHERE id = %s",
        [now, reason, by, release_id],
    )
    if not revoke_tokens:
        return 0
    return revoke_release_tokens(conn, release_id, because="withdrawn", now=now)
