"""Withdrawing a release, and the operators' list of releases per (channel, platform).

A withdrawal is immediate: the pair's pointer moves (to the release the operator names, else to
the newest release of the pair that is not withdrawn, else to none) and the release's outstanding
tokens are revoked, so its downloads are refused (`token_revoked`) and the next claim gets the
pointer's release. Agents that already run it keep it: nothing takes them back to an older build
but a rollback (`releases.rollback`, through a signed downgrade), and the list says which agents
run a withdrawn version (their latest run's version).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.inputs import required_text, stored_text
from control_plane.releases.products import CURRENT_TABLE, Product, product_of
from control_plane.releases.release_actions import mark_withdrawn, release_row
from control_plane.types import Connection
from ground.contract import Instant
from ground.limits import MAX_VERSION_LENGTH

__all__ = [
    "AgentOnRelease",
    "ReleaseEntry",
    "ReleaseList",
    "ReleaseTrackView",
    "WithdrawnRelease",
    "list_releases",
    "withdraw_release",
]

MAX_WITHDRAW_REASON_LENGTH = 500


@dataclass(frozen=True, kw_only=True)
class WithdrawnRelease:
    id: UUID
    version: str
    manifest_version: int
    channel: str
    platform: str
    reason: str
    # The pair's current release after the withdrawal (None: the pair offers nothing).
    current_version: str | None
    current_manifest_version: int | None
    revoked_tokens: int


@dataclass(frozen=True, kw_only=True)
class AgentOnRelease:
    agent_id: UUID
    org_id: UUID
    name: str


@dataclass(frozen=True, kw_only=True)
class ReleaseEntry:
    id: UUID
    version: str
    manifest_version: int
    published_at: Instant
    current: bool
    withdrawn_at: Instant | None = None
    withdrawn_reason: str | None = None
    withdrawn_by: str | None = None
    # Only for a withdrawn release: the agents whose latest reported version is its version.
    agents_running: tuple[AgentOnRelease, ...] = ()


@dataclass(frozen=True, kw_only=True)
class ReleaseTrackView:
    channel: str
    platform: str
    releases: tuple[ReleaseEntry, ...]  # newest first
    # The managed agent's releases, or those of nachtwacht's own agent (the updater).
    product: Product = "agent"


@dataclass(frozen=True, kw_only=True)
class ReleaseList:
    tracks: tuple[ReleaseTrackView, ...]


def withdraw_release(
    conn: Connection,
    release_id: UUID,
    *,
    reason: object,
    replacement: object,
    now: datetime,
    actor: Actor,
) -> WithdrawnRelease:
    """Withdraw a release inside the caller's transaction (see the module's docstring)."""
    reason_text = required_text(
        "reason",
        reason,
        MAX_WITHDRAW_REASON_LENGTH,
        required_to="withdraw a release (say why it is withdrawn)",
    )
    replacement_text = stored_text("replacement", replacement, MAX_VERSION_LENGTH)
    release, pointer = _locked_release(conn, release_id)
    successor = _successor(conn, release, replacement_text)
    revoked = mark_withdrawn(
        conn, release_id, reason=reason_text, by=actor.name or actor.kind, now=now
    )
    if replacement_text is not None or (
        pointer is not None and pointer["release_id"] == release_id
    ):
        _point_pair_at(conn, release, successor, now)
    current = _current_of_pair(conn, release)
    withdrawn = WithdrawnRelease(
        id=release_id,
        version=release["agent_version"],
        manifest_version=release["manifest_version"],
        channel=release["channel"],
        platform=release["platform"],
        reason=reason_text,
        current_version=None if current is None else current["agent_version"],
        current_manifest_version=None if current is None else current["manifest_version"],
        revoked_tokens=revoked,
    )
    _record_withdrawn(conn, withdrawn, replacement=replacement_text, actor=actor, now=now)
    return withdrawn


def _locked_release(
    conn: Connection, release_id: UUID
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The release, not yet withdrawn, and its pair's current-release row, locked."""
    release = release_row(
        conn,
        release_id,
        "id, agent_version, manifest_version, channel, platform, withdrawn_at, product",
    )
    # The pair's row FOR UPDATE waits for the grants in flight (they hold it FOR SHARE): the
    # revocation that follows then sees their tokens, and later grants see the new pointer.
    pointer = conn.execute(
        f"SELECT release_id FROM {_table(release)}"  # noqa: S608 - a constant table name
        " WHERE channel = %s AND platform = %s FOR UPDATE",
        [release["channel"], release["platform"]],
    ).fetchone()
    if release["withdrawn_at"] is not None:
        raise Conflict(
            f"release {release_id} ({release['agent_version']}) is already withdrawn",
            code="release_withdrawn",
        )
    return release, pointer


def _point_pair_at(
    conn: Connection, release: dict[str, Any], successor: dict[str, Any] | None, now: datetime
) -> None:
    """The pair's current release becomes the successor (none: nothing is offered)."""
    conn.execute(
        f"UPDATE {_table(release)} SET release_id = %s, changed_at = %s"  # noqa: S608 - a constant
        " WHERE channel = %s AND platform = %s",
        [
            None if successor is None else successor["id"],
            now,
            release["channel"],
            release["platform"],
        ],
    )


def _table(release: dict[str, Any]) -> str:
    """The table of the current releases of the release's product."""
    return CURRENT_TABLE[product_of(release["product"])]


def _current_of_pair(conn: Connection, release: dict[str, Any]) -> dict[str, Any] | None:
    current: dict[str, Any] | None = conn.execute(
        "SELECT rel.agent_version, rel.manifest_version"  # noqa: S608 - a constant table name
        f" FROM {_table(release)} cur"
        " JOIN releases rel ON rel.id = cur.release_id"
        " WHERE cur.channel = %s AND cur.platform = %s",
        [release["channel"], release["platform"]],
    ).fetchone()
    return current


def _record_withdrawn(
    conn: Connection,
    withdrawn: WithdrawnRelease,
    *,
    replacement: str | None,
    actor: Actor,
    now: datetime,
) -> None:
    record_action(
        conn,
        kind="release.withdrawn",
        actor=actor,
        at=now,
        data={
            "release_id": str(withdrawn.id),
            "version": withdrawn.version,
            "manifest_version": withdrawn.manifest_version,
            "channel": withdrawn.channel,
            "platform": withdrawn.platform,
            "reason": withdrawn.reason,
            "replacement": replacement,
            "current_version": withdrawn.current_version,
            "revoked_tokens": withdrawn.revoked_tokens,
        },
    )


def _successor(
    conn: Connection, release: dict[str, Any], replacement: str | None
) -> dict[str, Any] | None:
    """The release the pair is offered next: the named version of the same pair, else the newest
    release of the pair that is not withdrawn."""
    if replacement is None:
        found: dict[str, Any] | None = conn.execute(
            "SELECT id FROM releases WHERE channel = %s AND platform = %s AND id <> %s"
            " AND product = %s AND withdrawn_at IS NULL ORDER BY manifest_version DESC LIMIT 1",
            [release["channel"], release["platform"], release["id"], release["product"]],
        ).fetchone()
        return found
    found = conn.execute(
        "SELECT id FROM releases WHERE channel = %s AND platform = %s AND id <> %s"
        " AND product = %s AND withdrawn_at IS NULL AND agent_version = %s"
        " ORDER BY manifest_version DESC LIMIT 1",
        [release["channel"], release["platform"], release["id"], release["product"], replacement],
    ).fetchone()
    if found is None:
        raise InvalidInput(
            "replacement",
            replacement,
            f"is not a release of {release['channel']}/{release['platform']} that is not "
            "withdrawn (expected the version of another release of the same pair)",
        )
    return found


_RELEASES = """
SELECT rel.id, rel.agent_version, rel.manifest_version, rel.channel, rel.platform,
       rel.published_at, rel.withdrawn_at, rel.withdrawn_reason, rel.withdrawn_by,
       rel.product, (cur.release_id IS NOT NULL OR ucur.release_id IS NOT NULL) AS current
  FROM releases rel
  LEFT JOIN current_releases cur ON cur.release_id = rel.id
  LEFT JOIN current_updater_releases ucur ON ucur.release_id = rel.id
 ORDER BY rel.product, rel.channel, rel.platform, rel.manifest_version DESC
"""

# Each live agent's latest reported version (kept on its row as each run records one), matched
# against the withdrawn versions: looking it up in every agent's runs read a page of the runs
# table per agent, the page growing colder as the history grows. An updater release is matched
# against the version of nachtwacht's own agent the host reported. A signing withdrawn because the
# same build was signed again (`control_plane.releases.signed_again`) names nobody: its build is
# still offered, under the new signature.
_AGENTS_ON_WITHDRAWN = """
SELECT w.id AS release_id, a.id AS agent_id, a.org_id, a.name
  FROM releases w
  JOIN agents a ON a.deleted_at IS NULL
       AND CASE WHEN w.product = 'updater'
                THEN (SELECT uv.version FROM agent_updater_versions uv WHERE uv.agent_id = a.id)
                ELSE a.current_version END = w.agent_version
 WHERE w.withdrawn_at IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM releases live
                    WHERE live.withdrawn_at IS NULL AND live.product = w.product
                      AND live.channel = w.channel AND live.platform = w.platform
                      AND live.agent_version = w.agent_version AND live.sha256 = w.sha256)
 ORDER BY a.name, a.id
"""


def list_releases(conn: Connection) -> ReleaseList:
    """Every release per (channel, platform), newest first, withdrawn ones marked with the agents
    that still run them."""
    running: dict[UUID, list[AgentOnRelease]] = {}
    for row in conn.execute(_AGENTS_ON_WITHDRAWN).fetchall():
        running.setdefault(row["release_id"], []).append(
            AgentOnRelease(agent_id=row["agent_id"], org_id=row["org_id"], name=row["name"])
        )
    tracks: dict[tuple[Product, str, str], list[ReleaseEntry]] = {}
    for row in conn.execute(_RELEASES).fetchall():
        key = (product_of(row["product"]), row["channel"], row["platform"])
        tracks.setdefault(key, []).append(
            ReleaseEntry(
                id=row["id"],
                version=row["agent_version"],
                manifest_version=row["manifest_version"],
                published_at=row["published_at"],
                current=row["current"],
                withdrawn_at=row["withdrawn_at"],
                withdrawn_reason=row["withdrawn_reason"],
                withdrawn_by=row["withdrawn_by"],
                agents_running=tuple(running.get(row["id"], ())),
            )
        )
    return ReleaseList(
        tracks=tuple(
            ReleaseTrackView(
                channel=channel, platform=platform, releases=tuple(entries), product=product
            )
            for (product, channel, platform), entries in tracks.items()
        )
    )
