"""A build signed again: the pair's current build published once more, under a new signature.

A release manager does this when a release key is rotated or revoked (docs/trust_root.md): the
build hosts are being offered is signed again with a key the trust root names, so hosts that
follow the root can still take it. The waves judged the build, not its signature, so the new
signing takes the old one's place inside the publication's transaction:

- it is the pair's current release at once, in the old signing's stage and wave, that wave's soak
  going on (`stage_changed_at` kept), and its waves reach the same agents (an agent's place is
  hashed with the pair's first release of the build, `control_plane.rollout.offer.WAVES_OF`);
- the old signing is withdrawn, naming the new one. Its outstanding tokens are revoked when the
  newest trust root no longer names its key: a host following that root refuses the manifest, and
  its next claim gets the new signing. While the key is still trusted (a signature renewed before
  it expires, a key rotated without haste) a download already granted goes on: the host installs
  the same build, and no run fails because the release manager signed it again.
  Hosts that run the build already have nothing to do: it is the same version.

The same holds for a downgrade the pair was rolled back to: signed again, it replaces the
current downgrade without a second rollback (`rollback --to` the current version is no rollback).

"The current build" is the pair's current release with the same version and the same artifact
(sha256), neither halted nor under its own brake: a stopped build signed again stays stopped — it
is published as any release is and starts in the first wave. Publishing with an explicit stage
(`--stage`) keeps the operator's choice of stage.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from control_plane.events.trail import Actor
from control_plane.releases.products import CURRENT_TABLE, product_of
from control_plane.releases.release_actions import mark_withdrawn
from control_plane.trust_roots.services import newest_trust_root
from control_plane.types import Connection
from signed_release.manifest import Manifest

__all__ = ["current_signing_of", "withdraw_signed_again"]

_CURRENT_OF_BUILD = """
SELECT rel.id, rel.manifest_version, rel.key_id, rel.stage, rel.wave, rel.stage_changed_at
  FROM {table} cur JOIN releases rel ON rel.id = cur.release_id
 WHERE cur.channel = %s AND cur.platform = %s
   AND rel.agent_version = %s AND rel.sha256 = %s AND rel.braked_at IS NULL
   AND NOT EXISTS (SELECT 1 FROM release_halts h
                    WHERE h.release_id = rel.id AND h.resumed_at IS NULL)
   FOR UPDATE OF cur
"""


def current_signing_of(conn: Connection, parsed: Manifest) -> dict[str, Any] | None:
    """The pair's current release when it is this manifest's build and is not stopped, else None.

    FOR UPDATE on the pair's pointer waits for the grants in flight (they hold it FOR SHARE): the
    revocation that follows sees their tokens, and every later grant sees the new signing."""
    table = CURRENT_TABLE[product_of(parsed.product)]
    row: dict[str, Any] | None = conn.execute(
        _CURRENT_OF_BUILD.format(table=table),
        [parsed.channel, parsed.platform, parsed.agent_version, parsed.sha256],
    ).fetchone()
    return row


def withdraw_signed_again(
    conn: Connection,
    old: dict[str, Any],
    new: dict[str, Any],
    *,
    actor: Actor | None,
    now: datetime,
) -> int | None:
    """Withdraw the old signing, naming the one that replaces it; returns how many of its tokens
    were revoked, or None when they are kept (the newest trust root still names the old
    signing's key, or no root is published)."""
    root = newest_trust_root(conn)
    dropped = root is not None and old["key_id"] not in root.release_keys
    revoked = mark_withdrawn(
        conn,
        old["id"],
        reason=f"signed again: manifest_version {new['manifest_version']}, key "
        f"{str(new['key_id'])[:16]}…, replaces it",
        by=(actor.name or actor.kind) if actor is not None else "operator",
        now=now,
        revoke_tokens=dropped,
    )
    return revoked if dropped else None
