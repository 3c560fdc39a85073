"""Publishing a signed release and serving its artifact.

A release is stored only after its signature checks out against the operator-pinned public keys,
its artifact matches the manifest's length and sha256, it has not expired and its manifest_version
is newer than every release of its (channel, platform). The artifact lives in the database, so
every replica serves the same bytes.

A downgrade — an agent_version older than the newest the pair ever had — is refused unless the
operator marks it (`allow_downgrade`) and the signed manifest allows a downgrade too: an agent on a
newer version refuses any older build whose manifest does not say so. It must carry the very build
the pair published before under that version: a rollback goes back to a build hosts ran, never to
one no wave ever tried. A marked downgrade is stored as a rollback release and offered to no one
until `releases.rollback` makes it current.

Each pair has its own current release (`current_releases`): publishing for one pair never changes
what another pair is offered. The pair is per product (`control_plane.releases.products`): the
signed manifest says whether the build is the managed agent or nachtwacht's own agent, and an
operator who names the product they mean to publish is refused a build of the other.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from control_plane.errors import Conflict, InvalidInput
from control_plane.events.trail import Actor, record_action
from control_plane.releases.patches import (
    ServedKind,
    check_patches,
    count_served,
    read_patch,
    store_patches,
)
from control_plane.releases.products import CURRENT_TABLE, Product, product_of
from control_plane.releases.rollback import RolledBack, roll_back
from control_plane.releases.signed_again import current_signing_of, withdraw_signed_again
from control_plane.releases.stored_bytes import read_range
from control_plane.releases.withdrawal import (
    ReleaseList,
    WithdrawnRelease,
    list_releases,
    withdraw_release,
)
from control_plane.trust_roots.services import newest_trust_root
from control_plane.types import Connection, Pool
from ground.contract import ClaimedRelease, ReleaseView, artifact_path, format_instant
from signed_release.artifact import MAX_BUILD_BYTES
from signed_release.errors import ReleaseError, SignatureError, UnknownKey
from signed_release.manifest import Manifest, parse_manifest
from signed_release.signature import check_signature
from signed_release.trust_root import TrustRoot
from signed_release.versions import version_key

__all__ = [
    "ArtifactInfo",
    "PublishedRelease",
    "ReleaseService",
    "claim_release_view",
    "current_release",
    "release_view",
]


@dataclass(frozen=True, kw_only=True)
class ArtifactInfo:
    release_id: UUID
    length: int
    sha256: str


@dataclass(frozen=True, kw_only=True)
class PublishedRelease:
    id: UUID
    version: str
    manifest_version: int
    channel: str | None
    platform: str | None
    key_id: str
    sha256: str
    # True when this exact manifest was already stored: publishing it again changes nothing.
    already_published: bool = False
    # `canary` or `everyone` (control_plane.rollout.stages), and the wave it is in of how many.
    stage: str = "everyone"
    wave: int = 1
    waves: int = 1
    # Whether the pair offers it now: a downgrade is stored, not offered, until a rollback.
    current: bool = True
    # For a downgrade: the pair's newest version, the one it goes back from.
    downgrade_from: str | None = None
    # `agent` (the managed agent) or `updater` (nachtwacht's own agent), as the manifest signs it.
    product: Product = "agent"
    # For the current build signed again: the signing it replaced (now withdrawn), whose stage
    # and wave it keeps (`control_plane.releases.signed_again`).
    replaces_release_id: UUID | None = None
    replaces_manifest_version: int | None = None
    # How many of the replaced signing's outstanding tokens were revoked, its key no longer
    # trusted (their downloads are refused); None when nothing was replaced or its key is still
    # trusted (downloads already granted go on).
    replaced_tokens_revoked: int | None = None


def release_view(row: Mapping[str, Any]) -> ReleaseView:
    """The release as an agent's config offers it."""
    return ReleaseView(
        version=row["agent_version"],
        manifest_version=row["manifest_version"],
        channel=row["channel"],
        platform=row["platform"],
    )


def _current_statement(table: str) -> str:
    return f"""
SELECT rel.id, rel.manifest_version, rel.agent_version, rel.channel, rel.platform, rel.length,
       rel.sha256, rel.manifest, rel.signature, rel.product
  FROM {table} cur JOIN releases rel ON rel.id = cur.release_id
 WHERE cur.channel = %s AND cur.platform = %s"""  # noqa: S608 - a constant table name


_CURRENT = {product: _current_statement(table) for product, table in CURRENT_TABLE.items()}


def current_release(
    conn: Connection,
    channel: str,
    platform: str,
    *,
    for_grant: bool = False,
    product: Product = "agent",
) -> dict[str, Any] | None:
    """The release the pair is offered now, without its bytes; None when it has none.

    `for_grant` holds the pair's row FOR SHARE until the transaction ends: grants do not wait for
    each other, but a withdrawal waits for the grants in flight and then revokes their tokens."""
    statement = _CURRENT[product] + (" FOR SHARE OF cur" if for_grant else "")
    row: dict[str, Any] | None = conn.execute(statement, [channel, platform]).fetchone()
    return row


class ReleaseService:
    def __init__(self, pool: Pool, trusted_keys: Mapping[str, Ed25519PublicKey]) -> None:
        self._pool = pool
        self._trusted_keys = dict(trusted_keys)

    def publish(
        self,
        manifest: bytes,
        signature: bytes,
        artifact: bytes,
        *,
        now: datetime,
        actor: Actor | None = None,
        stage: object = None,
        allow_downgrade: object = False,
        patches: Mapping[str, bytes] | None = None,
        product: object = None,
    ) -> PublishedRelease:
        """Check and store a release at `now`. Refuses anything it cannot verify.

        It starts in the first wave (the `canary` stage) when its pair already has a release
        that is not withdrawn, else in the last (`everyone`) (`control_plane.rollout.stages`);
        `stage="everyone"` skips the earlier waves (the operator's choice, recorded with the
        publication). The pair's current build signed again takes its signing's place, in its
        stage and wave (`control_plane.releases.signed_again`).

        A downgrade is refused unless `allow_downgrade` (and its signed manifest allows one);
        then it is stored without becoming current (see the module's docstring).

        `product`, when given, is the product the operator means to publish: a manifest that
        signs the other one is refused."""
        if stage not in (None, "canary", "everyone"):
            raise InvalidInput("stage", stage, "is not 'canary' or 'everyone'")
        if not isinstance(allow_downgrade, bool):
            raise InvalidInput("allow_downgrade", allow_downgrade, "is not true or false")
        with self._pool.connection() as conn:
            root = newest_trust_root(conn)
        signer, parsed = self._verified(manifest, signature, root)
        _check_product(parsed, product)
        _check_artifact(artifact, parsed)
        check_patches(patches or {}, parsed)
        _check_not_expired(parsed, now)
        with self._pool.connection() as conn, conn.transaction():
            # An upload (the load balancer gives it 300 s), not an agent's request: it waits for
            # another publisher, and stores the build's bytes, without the requests' bounds
            # (`database.SessionBounds`); storing 100 MB took 6.7 s on a loaded machine.
            conn.execute("SET LOCAL lock_timeout = 0")
            conn.execute("SET LOCAL statement_timeout = 0")
            # One publisher at a time, so "newer than the pair's newest" holds across replicas.
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('nachtwacht.publish_release'))")
            conn.execute("SET LOCAL lock_timeout TO DEFAULT")
            same = _same_release(conn, parsed, manifest)
            if same is not None:
                return _published(same, already=True)
            _refuse_unless_newer(conn, parsed)
            _refuse_a_taken_manifest_version(conn, parsed)
            newer = _newer_version_of_pair(conn, parsed)
            if newer is not None:
                _refuse_unmarked_downgrade(parsed, newer, marked=allow_downgrade)
                _refuse_another_build_of_the_version(conn, parsed)
            replaced = current_signing_of(conn, parsed)
            row = _insert_release(
                conn,
                parsed,
                manifest=manifest,
                signature=signature,
                signer=signer,
                start=_start_of(conn, parsed, stage=stage, replaced=replaced, now=now),
                now=now,
            )
            _store_artifact(conn, row, artifact)
            store_patches(conn, row["id"], patches or {}, parsed)
            conn.execute("SET LOCAL statement_timeout TO DEFAULT")
            current = newer is None or replaced is not None
            if current:
                _make_current(conn, row, now)
            revoked = None
            if replaced is not None:
                revoked = withdraw_signed_again(conn, replaced, row, actor=actor, now=now)
            _record_published(
                conn,
                row,
                signer=signer,
                actor=actor,
                now=now,
                downgrade_from=newer,
                replaced=replaced,
            )
        return _published(
            row,
            already=False,
            current=current,
            downgrade_from=newer,
            replaced=replaced,
            revoked=revoked,
        )

    def _verified(
        self, manifest: bytes, signature: bytes, root: TrustRoot | None
    ) -> tuple[str, Manifest]:
        """The signer's key id and the manifest, or the refusal naming what failed. Once a trust
        root is published, its release keys are the ones agents accept, so they are the ones a
        release is checked against (the configured keys no longer count)."""
        trusted = self._trusted_keys if root is None else _release_keys(root)
        if not trusted:
            raise InvalidInput(
                "signature",
                "(not checked)",
                "cannot be checked: no trust root is published and no release public key is "
                "configured (--release-public-key or NACHTWACHT_RELEASE_PUBLIC_KEYS)",
                code="release_rejected",
            )
        try:
            signer = check_signature(manifest, signature, trusted)
            parsed = parse_manifest(manifest)
        except UnknownKey as exc:
            if root is None:
                raise InvalidInput(
                    "signature", "(refused)", str(exc), code="release_rejected", message=str(exc)
                ) from exc
            # Every agent following the root would refuse it: say which root, not "unknown key".
            raise InvalidInput(
                "signature",
                exc.key_id,
                f"is by a key that trust root v{root.version} does not name as a release key "
                f"(it names {', '.join(sorted(root.release_keys))}): agents following the root "
                "would refuse this release; sign it with one of those keys",
                code="release_rejected",
            ) from exc
        except ReleaseError as exc:
            # A signature that is not one, or does not vouch for these bytes, is the signature's
            # refusal; the rest is the manifest's.
            field = "signature" if isinstance(exc, SignatureError) else "manifest"
            raise InvalidInput(
                field, "(refused)", str(exc), code="release_rejected", message=str(exc)
            ) from exc
        return signer, parsed

    def withdraw(
        self,
        release_id: UUID,
        *,
        reason: object,
        replacement: object = None,
        now: datetime,
        actor: Actor | None = None,
    ) -> WithdrawnRelease:
        """Withdraw a release at `now`: claims stop offering it, its outstanding tokens are
        revoked, and its pair is offered `replacement` (a version of the same pair) or else the
        newest release of the pair that is not withdrawn."""
        with self._pool.connection() as conn, conn.transaction():
            return withdraw_release(
                conn,
                release_id,
                reason=reason,
                replacement=replacement,
                now=now,
                actor=actor or Actor(kind="operator"),
            )

    def roll_back(
        self,
        *,
        channel: object,
        platform: object,
        to: object = None,
        reason: object,
        stage: object = "everyone",
        now: datetime,
        actor: Actor | None = None,
        product: object = "agent",
    ) -> RolledBack:
        """Roll the pair back at `now` to `to` (else its previous good version), through a
        signed downgrade release (`control_plane.releases.rollback`)."""
        with self._pool.connection() as conn, conn.transaction():
            return roll_back(
                conn,
                product=product,
                channel=channel,
                platform=platform,
                to=to,
                reason=reason,
                stage=stage,
                now=now,
                actor=actor or Actor(kind="operator"),
            )

    def list(self) -> ReleaseList:
        """Every release per (channel, platform), withdrawn ones with the agents that run them."""
        with self._pool.connection() as conn:
            return list_releases(conn)

    def count_served(self, release_id: UUID, kind: ServedKind, size: int) -> None:
        """Count the bytes one download answer carries (`/metrics`, by release and kind)."""
        count_served(self._pool, release_id, kind, size)

    def read_patch(self, release_id: UUID, base: str, start: int, end: int) -> Iterator[bytes]:
        """The bytes `start..end` (inclusive) of a release's patch from `base`, in slices."""
        return read_patch(self._pool, release_id, base, start, end)

    def read_artifact(self, release_id: UUID, start: int, end: int) -> Iterator[bytes]:
        """The bytes `start..end` (inclusive) of a release's artifact, in slices."""
        return read_range(
            self._pool,
            "SELECT substring(content FROM %s FOR %s) AS part FROM release_artifacts"
            " WHERE release_id = %s",
            [release_id],
            start,
            end,
        )


def _published(
    row: Mapping[str, Any],
    *,
    already: bool,
    current: bool | None = None,
    downgrade_from: str | None = None,
    replaced: Mapping[str, Any] | None = None,
    revoked: int | None = None,
) -> PublishedRelease:
    return PublishedRelease(
        id=row["id"],
        version=row["agent_version"],
        manifest_version=row["manifest_version"],
        channel=row["channel"],
        platform=row["platform"],
        key_id=row["key_id"],
        sha256=row["sha256"],
        already_published=already,
        stage=row["stage"],
        wave=row["wave"],
        waves=row["waves"],
        current=bool(row["current"]) if current is None else current,
        downgrade_from=downgrade_from,
        product=row["product"],
        replaces_release_id=None if replaced is None else replaced["id"],
        replaces_manifest_version=None if replaced is None else replaced["manifest_version"],
        replaced_tokens_revoked=revoked,
    )


def claim_release_view(row: Mapping[str, Any], run_id: UUID) -> ClaimedRelease:
    """The release as a claim response carries it: exact manifest and signature bytes, base64."""
    return ClaimedRelease(
        version=row["agent_version"],
        manifest_version=row["manifest_version"],
        manifest_b64=base64.b64encode(bytes(row["manifest"])).decode("ascii"),
        signature_b64=base64.b64encode(bytes(row["signature"])).decode("ascii"),
        artifact_url=artifact_path(run_id),
    )


def _release_keys(root: TrustRoot) -> dict[str, Ed25519PublicKey]:
    return {
        found_id: Ed25519PublicKey.from_public_bytes(raw)
        for found_id, raw in root.release_keys.items()
    }


def _check_artifact(artifact: bytes, parsed: Manifest) -> None:
    """The bytes are the ones the signed manifest names: its length and its sha256; a build the
    platform takes (`MAX_BUILD_BYTES`, whichever door it came through), and so is each patch."""
    if parsed.length > MAX_BUILD_BYTES:
        raise InvalidInput(
            "artifact",
            f"{parsed.length} bytes",
            f"(the manifest's length) is larger than the largest build the platform takes"
            f" ({MAX_BUILD_BYTES} bytes)",
            code="release_rejected",
        )
    for offer in parsed.patches:  # each read whole into memory too, by either door
        if offer.length > MAX_BUILD_BYTES:
            raise InvalidInput(
                "patches",
                f"{offer.length} bytes",
                f"(the manifest's patch from {offer.base_version}) is larger than the largest"
                f" build the platform takes ({MAX_BUILD_BYTES} bytes)",
                code="release_rejected",
            )
    if len(artifact) != parsed.length:
        raise InvalidInput(
            "artifact",
            f"{len(artifact)} bytes",
            f"does not match the manifest's length of {parsed.length} bytes",
            code="release_rejected",
        )
    digest = hashlib.sha256(artifact).hexdigest()
    if digest != parsed.sha256:
        raise InvalidInput(
            "artifact",
            f"sha256 {digest[:16]}…",
            f"does not match the manifest's sha256 {parsed.sha256[:16]}…",
            code="release_rejected",
        )


def _check_not_expired(parsed: Manifest, now: datetime) -> None:
    if parsed.expires <= now:
        raise InvalidInput(
            "manifest.expires",
            format_instant(parsed.expires),
            f"is not after now ({format_instant(now)}): the manifest has expired",
            code="release_rejected",
        )


# The wave a release is in, and of how many: the plan's last at `everyone`, else its own but
# never the last (the plan may have shrunk since; `control_plane.rollout.waves.effective_wave`).
_WAVE = """CASE WHEN stage = 'everyone' THEN (SELECT count(*)::integer FROM rollout_waves)
       ELSE greatest(1, least(wave, (SELECT count(*)::integer - 1 FROM rollout_waves))) END
       AS wave, (SELECT count(*)::integer FROM rollout_waves) AS waves"""

_SAME = f"""
SELECT id, manifest_version, agent_version, channel, platform, key_id, sha256, manifest, stage,
       product, {_WAVE},
       (EXISTS (SELECT 1 FROM current_releases cur WHERE cur.release_id = releases.id)
        OR EXISTS (SELECT 1 FROM current_updater_releases cur
                    WHERE cur.release_id = releases.id)) AS current
  FROM releases WHERE channel = %s AND platform = %s AND manifest_version = %s
"""  # noqa: S608 - constant columns

# A release at `everyone` is in the plan's last wave, one in the `canary` stage in the wave given.
_INSERT = f"""
INSERT INTO releases (manifest_version, agent_version, channel, platform, issued_at, expires,
                      length, sha256, key_id, manifest, signature, published_at, stage,
                      stage_changed_at, wave, product)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
        CASE WHEN %s = 'everyone' THEN (SELECT count(*) FROM rollout_waves) ELSE %s END, %s)
RETURNING id, manifest_version, agent_version, channel, platform, key_id, sha256, stage, product,
          {_WAVE}
"""  # noqa: S608 - constant columns


def _same_release(conn: Connection, parsed: Manifest, manifest: bytes) -> dict[str, Any] | None:
    """The release these exact manifest bytes already published (publishing again is a no-op)."""
    same = conn.execute(
        _SAME, [parsed.channel, parsed.platform, parsed.manifest_version]
    ).fetchone()
    return same if same is not None and bytes(same["manifest"]) == manifest else None


def _refuse_unless_newer(conn: Connection, parsed: Manifest) -> None:
    """A release must be newer than its pair's newest: no rollback by publishing an old one."""
    newest = conn.execute(
        "SELECT manifest_version, agent_version FROM releases"
        " WHERE product = %s AND channel = %s AND platform = %s"
        " ORDER BY manifest_version DESC LIMIT 1",
        [parsed.product, parsed.channel, parsed.platform],
    ).fetchone()
    if newest is not None and parsed.manifest_version <= newest["manifest_version"]:
        raise Conflict(
            f"manifest_version: {parsed.manifest_version} is not newer than the newest "
            f"{_product_words(parsed.product)}release of {parsed.channel}/{parsed.platform}, "
            f"{newest['manifest_version']} ({newest['agent_version']})",
            code="release_not_newer",
        )


def _refuse_a_taken_manifest_version(conn: Connection, parsed: Manifest) -> None:
    """A manifest_version names one release of its (channel, platform), whatever its product:
    one the other product's release took is refused by name, not by the constraint."""
    taken = conn.execute(
        "SELECT agent_version, channel, platform, product FROM releases"
        " WHERE channel = %s AND platform = %s AND manifest_version = %s",
        [parsed.channel, parsed.platform, parsed.manifest_version],
    ).fetchone()
    if taken is not None:
        raise Conflict(
            f"manifest_version: {parsed.manifest_version} is already the manifest_version of "
            f"{_product_words(taken['product'])}release {taken['agent_version']} of "
            f"{taken['channel']}/{taken['platform']} (expected a new one: sign again without "
            "--manifest-version, or with a larger one)",
            code="release_not_newer",
        )


def _newer_version_of_pair(conn: Connection, parsed: Manifest) -> str | None:
    """The pair's newest agent_version when it is newer than this release's, else None.

    Withdrawn releases count: hosts may still run them, and they refuse an older build that is
    not signed as a downgrade."""
    versions = [
        str(row["agent_version"])
        for row in conn.execute(
            "SELECT DISTINCT agent_version FROM releases"
            " WHERE product = %s AND channel = %s AND platform = %s",
            [parsed.product, parsed.channel, parsed.platform],
        ).fetchall()
    ]
    if not versions:
        return None
    newest = max(versions, key=version_key)
    return newest if version_key(newest) > version_key(parsed.agent_version) else None


def _refuse_unmarked_downgrade(parsed: Manifest, newer: str, *, marked: bool) -> None:
    """A downgrade is published only on purpose, and only one agents can take."""
    pair = f"{parsed.channel}/{parsed.platform}"
    unsigned = (
        "the signed manifest does not allow a downgrade (allow_downgrade: false), so every agent "
        f"on {newer} would refuse it: sign the build again with `nachtwacht release sign "
        f"--allow-downgrade --version {parsed.agent_version} --channel {parsed.channel} "
        f"--platform {parsed.platform} …`"
    )
    if not marked:
        message = (
            f"agent_version: {parsed.agent_version} is older than {newer}, the newest version of "
            f"{pair}: publishing it is a downgrade; mark it with --allow-downgrade (API: "
            '"allow_downgrade": true) to store it as a rollback release'
        )
        if not parsed.allow_downgrade:
            message += f", and {unsigned}"
        raise Conflict(
            message,
            code="release_downgrade",
            version=parsed.agent_version,
            newest_version=newer,
            signed_allow_downgrade=parsed.allow_downgrade,
        )
    if not parsed.allow_downgrade:
        raise InvalidInput(
            "manifest.allow_downgrade",
            False,
            f"must be true to publish {parsed.agent_version} below {newer} ({pair}): {unsigned}",
            code="release_downgrade",
        )


def _refuse_another_build_of_the_version(conn: Connection, parsed: Manifest) -> None:
    """A downgrade must carry the very build published before under its version: a host that ran
    that version keeps its folder and never installs another build under the same name, and a
    version the pair never published is no way back (no wave ever ran it)."""
    pair = f"{parsed.channel}/{parsed.platform}"
    before = conn.execute(
        "SELECT 1 FROM releases"
        " WHERE product = %s AND channel = %s AND platform = %s AND agent_version = %s",
        [parsed.product, parsed.channel, parsed.platform, parsed.agent_version],
    ).fetchone()
    if before is None:
        raise InvalidInput(
            "manifest.agent_version",
            parsed.agent_version,
            f"was never published on {pair}: a downgrade goes back to a build the pair offered"
            " before (sign that version's build again); publish an untried build as a newer"
            " version",
            code="release_downgrade",
        )
    other = conn.execute(
        "SELECT sha256, manifest_version FROM releases"
        " WHERE product = %s AND channel = %s AND platform = %s AND agent_version = %s"
        " AND sha256 <> %s ORDER BY manifest_version DESC LIMIT 1",
        [parsed.product, parsed.channel, parsed.platform, parsed.agent_version, parsed.sha256],
    ).fetchone()
    if other is not None:
        raise InvalidInput(
            "artifact",
            f"sha256 {parsed.sha256[:16]}…",
            f"is not the {parsed.agent_version} build published before (manifest_version "
            f"{other['manifest_version']}, sha256 {other['sha256'][:16]}…): hosts that ran "
            f"{parsed.agent_version} refuse another build of it; sign that same file again",
            code="release_downgrade",
        )


def _check_product(parsed: Manifest, product: object) -> None:
    """Refuse a manifest that signs the other product than the one the operator means to publish
    (`product` None: whichever the manifest names)."""
    if product is not None and product_of(product) != parsed.product:
        raise InvalidInput(
            "manifest.product",
            parsed.product,
            f"is not the product being published ({product!r}): the build is nachtwacht's "
            + ("own agent (the updater)" if parsed.product == "updater" else "managed agent")
            + "; publish it as that product",
            code="release_rejected",
        )


def _start_of(
    conn: Connection,
    parsed: Manifest,
    *,
    stage: object,
    replaced: Mapping[str, Any] | None,
    now: datetime,
) -> _Start:
    """Where a new release's rollout starts: the stage the operator asked for; else where the
    signing it replaces was (the build's rollout goes on); else the pair's starting stage."""
    if stage is not None:
        return _Start(stage=str(stage), wave=1, since=now)
    if replaced is not None:
        return _Start(
            stage=replaced["stage"],
            wave=replaced["wave"],
            since=replaced["stage_changed_at"] or now,
        )
    return _Start(stage=_starting_stage(conn, parsed), wave=1, since=now)


def _starting_stage(conn: Connection, parsed: Manifest) -> str:
    """`canary` when the pair already has a release that is not withdrawn, else `everyone`;
    `everyone` too when the plan has one wave only (there is no earlier wave to start in)."""
    earlier = conn.execute(
        "SELECT (SELECT count(*) FROM rollout_waves) > 1 AS waves, EXISTS (SELECT 1 FROM releases"
        " WHERE product = %s AND channel = %s AND platform = %s AND withdrawn_at IS NULL)"
        " AS earlier",
        [parsed.product, parsed.channel, parsed.platform],
    ).fetchone()
    assert earlier is not None
    return "canary" if earlier["waves"] and earlier["earlier"] else "everyone"


@dataclass(frozen=True, kw_only=True)
class _Start:
    """Where a new release's rollout starts: its stage, its wave in the `canary` stage, and since
    when it is in that wave (its soak counts from then)."""

    stage: str
    wave: int
    since: datetime


def _insert_release(
    conn: Connection,
    parsed: Manifest,
    *,
    manifest: bytes,
    signature: bytes,
    signer: str,
    start: _Start,
    now: datetime,
) -> dict[str, Any]:
    row = conn.execute(
        _INSERT,
        [
            parsed.manifest_version,
            parsed.agent_version,
            parsed.channel,
            parsed.platform,
            parsed.issued_at,
            parsed.expires,
            parsed.length,
            parsed.sha256,
            signer,
            manifest,
            signature,
            now,
            start.stage,
            start.since,
            start.stage,
            start.wave,
            parsed.product,
        ],
    ).fetchone()
    assert row is not None
    return row


def _store_artifact(conn: Connection, row: Mapping[str, Any], artifact: bytes) -> None:
    """The artifact's bytes beside the release."""
    conn.execute(
        "INSERT INTO release_artifacts (release_id, content) VALUES (%s, %s)",
        [row["id"], artifact],
    )


def _make_current(conn: Connection, row: Mapping[str, Any], now: datetime) -> None:
    """The release becomes its pair's current one."""
    table = CURRENT_TABLE[product_of(row["product"])]
    conn.execute(
        f"INSERT INTO {table} (channel, platform, release_id, changed_at)"  # noqa: S608 - a constant
        " VALUES (%s, %s, %s, %s) ON CONFLICT (channel, platform)"
        " DO UPDATE SET release_id = EXCLUDED.release_id, changed_at = EXCLUDED.changed_at",
        [row["channel"], row["platform"], row["id"], now],
    )


def _product_words(product: str) -> str:
    return "updater " if product == "updater" else ""


def _record_published(
    conn: Connection,
    row: Mapping[str, Any],
    *,
    signer: str,
    actor: Actor | None,
    now: datetime,
    downgrade_from: str | None,
    replaced: Mapping[str, Any] | None,
) -> None:
    record_action(
        conn,
        kind="release.published",
        actor=actor or Actor(kind="operator"),
        at=now,
        data={
            "release_id": str(row["id"]),
            "version": row["agent_version"],
            "manifest_version": row["manifest_version"],
            "channel": row["channel"],
            "platform": row["platform"],
            "key_id": signer,
            "stage": row["stage"],
            "wave": row["wave"],
            "downgrade_from": downgrade_from,
            "product": row["product"],
            "replaces_release_id": None if replaced is None else str(replaced["id"]),
        },
    )
