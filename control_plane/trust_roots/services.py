"""Storing and serving the signed trust roots.

The control plane holds no root key and no release key: it cannot make or change a root. It
stores the roots operators give it, exactly as given, and refuses one its agents would refuse,
so the chain it serves is one every agent can walk: the first stored is version 1 and signed by
a threshold of its own root keys; every later one is the next version, signed by a threshold of
the previous root's root keys and of its own (`signed_release.trust_root`). A root already
expired is refused too: an agent reaching it would accept no release at all.

A version, once stored, never changes: publishing the same bytes again changes nothing, other
bytes under a stored version are a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.trust_roots.unverifiable import FindUnverifiable, UnverifiableRelease
from control_plane.types import Connection, Pool
from ground.contract import format_instant
from signed_release.errors import TrustRootError
from signed_release.trust_root import (
    TrustRoot,
    check_not_expired,
    next_trust_root,
    read_trust_root,
    self_signed_root,
)

__all__ = [
    "AgentsStanding",
    "HeldRoots",
    "PublishedTrustRoot",
    "StoredTrustRoot",
    "TrustRootList",
    "TrustRootService",
    "UnverifiableNow",
    "agents_by_held_root",
    "newest_trust_root",
    "unverifiable_under_newest",
]

# The column is a PostgreSQL integer: a version beyond it is simply not stored.
_MAX_STORED_VERSION = 2**31 - 1
# One publisher at a time across replicas, so "the next after the newest stored" holds.
_PUBLISH_LOCK = "SELECT pg_advisory_xact_lock(hashtext('nachtwacht.publish_trust_root'))"


@dataclass(frozen=True, kw_only=True)
class PublishedTrustRoot:
    version: int
    expires_at: datetime
    release_key_ids: tuple[str, ...]
    root_key_ids: tuple[str, ...]
    root_threshold: int
    # True when these exact bytes were already stored: publishing them again changes nothing.
    already_published: bool = False
    # The newest version stored: this one, unless these bytes are an older version's again.
    newest_version: int = 0
    # Live releases signed by a key the newest root does not name: agents following it refuse
    # them, so each says what to do (`control_plane.trust_roots.unverifiable`). Against the
    # newest root even when an older version's bytes are published again: that is the root
    # agents follow.
    unverifiable_releases: tuple[UnverifiableRelease, ...] = ()


@dataclass(frozen=True, kw_only=True)
class StoredTrustRoot:
    version: int
    expires_at: datetime
    published_at: datetime
    published_by: str
    agents_holding: int  # agents that last said they hold this version


@dataclass(frozen=True, kw_only=True)
class TrustRootList:
    roots: tuple[StoredTrustRoot, ...]  # newest first
    newest_version: int | None
    agents_holding_none: int  # agents that never said they hold a root
    agents_holding_older: int  # agents holding a version below the newest
    # Live releases signed by a key the newest root does not name, as publishing it names them.
    unverifiable_releases: tuple[UnverifiableRelease, ...] = ()


@dataclass(frozen=True, kw_only=True)
class UnverifiableNow:
    """The live releases the newest root leaves unverifiable, as they stand (none while no root
    is published: agents then trust their key files, and the control plane checks releases
    against its configured key)."""

    newest_version: int | None
    releases: tuple[UnverifiableRelease, ...]


def _refusal(exc: TrustRootError) -> InvalidInput:
    return InvalidInput("body", "(refused)", str(exc), code="trust_root_rejected", message=str(exc))


def _published(
    root: TrustRoot,
    *,
    already: bool,
    newest_version: int,
    unverifiable: tuple[UnverifiableRelease, ...] = (),
) -> PublishedTrustRoot:
    return PublishedTrustRoot(
        version=root.version,
        expires_at=root.expires,
        release_key_ids=tuple(sorted(root.release_keys)),
        root_key_ids=tuple(sorted(root.root_key_ids)),
        root_threshold=root.root_threshold,
        already_published=already,
        newest_version=newest_version,
        unverifiable_releases=unverifiable,
    )


class TrustRootService:
    def __init__(self, pool: Pool, *, find_unverifiable: FindUnverifiable) -> None:
        """`find_unverifiable`: the live releases a root leaves unverifiable, named in the answer
        to publishing it (`control_plane.rollout.unverifiable.unverifiable_releases`)."""
        self._pool = pool
        self._find_unverifiable = find_unverifiable

    def publish(self, body: bytes, *, now: datetime, actor: Actor) -> PublishedTrustRoot:
        """Store `body` as the next trust root after checking it chains from the newest stored
        (see the module's docstring); refused with `InvalidInput` naming why, or `Conflict` for
        other bytes under a stored version."""
        try:
            candidate = read_trust_root(body)
        except TrustRootError as exc:
            raise _refusal(exc) from exc
        with self._pool.connection() as conn, conn.transaction():
            conn.execute(_PUBLISH_LOCK)
            stored = _body(conn, candidate.version)
            if stored is not None:
                if stored == body:
                    # Nothing changes; the list is the newest root's as it stands, whichever
                    # stored version these bytes are, so "is anything left?" has one answer.
                    newest_root = newest_trust_root(conn)
                    assert newest_root is not None, "a version is stored"
                    return _published(
                        candidate,
                        already=True,
                        newest_version=newest_root.version,
                        unverifiable=self._find_unverifiable(
                            conn, frozenset(newest_root.release_keys)
                        ),
                    )
                raise Conflict(
                    f"trust root v{candidate.version} is already published with other bytes: "
                    "a published version never changes (publish the next version instead)",
                    code="trust_root_version_taken",
                    version=candidate.version,
                )
            newest = _newest(conn)
            root = _chained(newest, body, candidate)
            try:
                check_not_expired(root, now)
            except TrustRootError as exc:
                raise _refusal(exc) from exc
            conn.execute(
                "INSERT INTO trust_roots (version, body, expires_at, published_at, published_by)"
                " VALUES (%s, %s, %s, %s, %s)",
                [root.version, body, root.expires, now, _who(actor)],
            )
            unverifiable = self._find_unverifiable(conn, frozenset(root.release_keys))
            record_action(
                conn,
                kind="trust_root.published",
                actor=actor,
                at=now,
                data={
                    "version": root.version,
                    "expires_at": format_instant(root.expires),
                    "release_key_ids": sorted(root.release_keys),
                    "root_key_ids": sorted(root.root_key_ids),
                    "root_threshold": root.root_threshold,
                    "unverifiable_release_ids": [str(u.release_id) for u in unverifiable],
                },
            )
        return _published(
            root, already=False, newest_version=root.version, unverifiable=unverifiable
        )

    def body(self, version: int) -> bytes | None:
        """The exact bytes of `version`; None when it is not published."""
        if not 1 <= version <= _MAX_STORED_VERSION:
            return None
        with self._pool.connection() as conn:
            return _body(conn, version)

    def newest_version(self) -> int | None:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT max(version) AS version FROM trust_roots").fetchone()
        return None if row is None else row["version"]

    def unverifiable_now(self) -> UnverifiableNow:
        """The live releases the newest root leaves unverifiable, as they stand now: what the
        operators' pages show after publishing has named them once."""
        with self._pool.connection() as conn:
            return unverifiable_under_newest(conn, self._find_unverifiable)

    def list(self) -> TrustRootList:
        """Every stored version, newest first, with how many agents (not deleted) hold it, and
        the live releases the newest leaves unverifiable."""
        with self._pool.connection() as conn:
            roots = conn.execute(
                "SELECT version, expires_at, published_at, published_by FROM trust_roots"
                " ORDER BY version DESC"
            ).fetchall()
            held = agents_by_held_root(conn)
            unverifiable = unverifiable_under_newest(conn, self._find_unverifiable)
        newest = roots[0]["version"] if roots else None
        behind = held.standing(newest)
        return TrustRootList(
            roots=tuple(
                StoredTrustRoot(
                    version=row["version"],
                    expires_at=row["expires_at"],
                    published_at=row["published_at"],
                    published_by=row["published_by"],
                    agents_holding=held.by_version.get(row["version"], 0),
                )
                for row in roots
            ),
            newest_version=newest,
            agents_holding_none=behind.none,
            agents_holding_older=behind.older,
            unverifiable_releases=unverifiable.releases,
        )


def unverifiable_under_newest(conn: Connection, find: FindUnverifiable) -> UnverifiableNow:
    """The live releases signed by a key the newest stored root does not name. Its cost does not
    grow with history: the newest root is one row of the primary key's index (a few kB, read in
    well under a millisecond), and `find` reads the releases not withdrawn, one query when none
    is left unverifiable."""
    newest = newest_trust_root(conn)
    if newest is None:
        return UnverifiableNow(newest_version=None, releases=())
    return UnverifiableNow(
        newest_version=newest.version, releases=find(conn, frozenset(newest.release_keys))
    )


@dataclass(frozen=True)
class AgentsStanding:
    current: int  # holding the newest root, or a newer one they were enrolled with
    older: int  # holding an earlier version
    none: int  # holding none (on their trusted-key files, or not said yet)


@dataclass(frozen=True)
class HeldRoots:
    """Live agents by the root version they last said they hold (None: none)."""

    by_version: dict[int | None, int]

    def standing(self, newest: int | None) -> AgentsStanding:
        """The agents against the newest published root. An agent above it was enrolled with a
        root not given to the control plane yet: it is not behind, so it counts as current."""
        older = current = 0
        for version, count in self.by_version.items():
            if version is None:
                continue
            if newest is not None and version < newest:
                older += count
            else:
                current += count
        return AgentsStanding(current=current, older=older, none=self.by_version.get(None, 0))


def agents_by_held_root(conn: Connection) -> HeldRoots:
    """One aggregate over the agents: a row per version held (a handful), whatever the fleet."""
    rows = conn.execute(
        "SELECT trust_root_version AS version, count(*) AS agents FROM agents"
        " WHERE deleted_at IS NULL GROUP BY trust_root_version"
    ).fetchall()
    return HeldRoots({row["version"]: row["agents"] for row in rows})


def _body(conn: Connection, version: int) -> bytes | None:
    row = conn.execute("SELECT body FROM trust_roots WHERE version = %s", [version]).fetchone()
    return None if row is None else bytes(row["body"])


def newest_trust_root(conn: Connection) -> TrustRoot | None:
    """The newest root stored (it was checked when it was published), or None."""
    row = _newest(conn)
    return None if row is None else read_trust_root(bytes(row["body"]))


def _newest(conn: Connection) -> dict[str, Any] | None:
    row: dict[str, Any] | None = conn.execute(
        "SELECT version, body FROM trust_roots ORDER BY version DESC LIMIT 1"
    ).fetchone()
    return row


def _chained(newest: dict[str, Any] | None, body: bytes, candidate: TrustRoot) -> TrustRoot:
    """`body` as the root after `newest` (the first: version 1, signed by its own root keys)."""
    try:
        if newest is not None:
            return next_trust_root(read_trust_root(bytes(newest["body"])), body)
        if candidate.version != 1:
            raise InvalidInput(
                "body",
                f"trust root v{candidate.version}",
                "is not version 1: the first trust root published must be version 1, so every "
                "agent can walk the chain from its start",
                code="trust_root_rejected",
            )
        return self_signed_root(body)
    except TrustRootError as exc:
        raise _refusal(exc) from exc


def _who(actor: Actor) -> str:
    """The name the list shows for whoever published."""
    return actor.name or (f"{actor.kind}:{actor.id}" if actor.id is not None else actor.kind)
