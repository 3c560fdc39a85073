"""Verification of a release: bytes and a reference time in, a `VerifiedRelease` out, or a specific
`ReleaseRefused`. Pure: no files, no network, no clock reads — the updater passes everything in.

The order follows python-tuf: first the signature over the exact bytes (nothing unsigned is even
parsed for meaning), then the fields, then the policy of this host (the product it installs as,
platform, channel, the clock's
sanity, an issue date in the future, expiry, the rollback floor, downgrades).

`now` is the reference time the updater passes in. On a customer host it is
`ServerClock.expiry_clock()`: never earlier than the host's own clock, so the control plane cannot
move it back to make an expired manifest look fresh (docs/agent_updater.md "Time").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_daemon.errors import (
    BadReleaseSignature,
    ClockBehind,
    IssuedInFuture,
    MalformedRelease,
    ManifestExpired,
    ManifestRollback,
    UnknownSigningKey,
    VersionDowngrade,
    WrongChannel,
    WrongPlatform,
    WrongProduct,
)
from signed_release.errors import MalformedManifest, ManifestError, SignatureError, UnknownKey
from signed_release.manifest import Manifest, Product, format_instant, parse_manifest
from signed_release.signature import check_signature
from signed_release.versions import is_valid_version, version_key

__all__ = ["MAX_ISSUED_AT_SKEW", "VerifiedRelease", "verify_release"]

# How far ahead of `now` a manifest's `issued_at` may be. A signer's clock a few minutes fast is
# normal; beyond this it is wrong, and the manifest would become the running build's date that
# every correctly dated release is refused against (ClockBehind) for as long as it is ahead. The
# skew bounds that harm to ten minutes.
MAX_ISSUED_AT_SKEW = timedelta(minutes=10)


@dataclass(frozen=True, kw_only=True)
class VerifiedRelease:
    """A release this host may install: the manifest, the exact bytes that were verified, and the
    id of the trusted key that signed them."""

    manifest: Manifest
    manifest_bytes: bytes
    signature: bytes
    key_id: str

    @property
    def version(self) -> str:
        return self.manifest.agent_version


def verify_release(
    manifest_bytes: bytes,
    signature: bytes,
    trusted_keys: Mapping[str, Ed25519PublicKey],
    *,
    installed_version: str | None,
    floor: int | None,
    now: datetime,
    platform: str,
    channel: str,
    running_build_date: datetime | None = None,
    product: Product = "agent",
) -> VerifiedRelease:
    """Check a release against the pinned keys and this host's policy.

    `floor` is the highest `manifest_version` this host has accepted; `running_build_date` is when
    the running build's manifest was issued (a clock earlier than that is wrong). `product` is
    the program the release is to be installed as: the managed agent, or this updater itself;
    the signed manifest must name the same one. Raises a
    `ReleaseRefused` subclass naming what was expected and what was found.
    """
    if now.utcoffset() is None:
        raise ValueError(f"now: {now!r} is naive (expected an aware UTC datetime)")
    try:
        signer = check_signature(manifest_bytes, signature, trusted_keys)
    except UnknownKey as exc:
        raise UnknownSigningKey(f"release refused: {exc}") from exc
    except SignatureError as exc:
        raise BadReleaseSignature(f"release refused: {exc}") from exc
    try:
        manifest = parse_manifest(manifest_bytes)
    except MalformedManifest as exc:  # names the manifest itself: "manifest: not valid JSON …"
        raise MalformedRelease(f"release refused: {exc}") from exc
    except ManifestError as exc:  # names the field alone: "expires: …"
        raise MalformedRelease(f"release refused: manifest field {exc}") from exc

    if manifest.product != product:
        raise WrongProduct(
            f"release refused: product {manifest.product!r} is not the {product!r} being "
            f"updated (a build of the other program)"
        )
    if manifest.platform != platform:
        raise WrongPlatform(
            f"release refused: platform {manifest.platform!r} is not this host's {platform!r}"
        )
    if manifest.channel != channel:
        raise WrongChannel(
            f"release refused: channel {manifest.channel!r} is not the followed channel {channel!r}"
        )
    if running_build_date is not None and now < running_build_date:
        raise ClockBehind(
            f"release refused: the clock reads {format_instant(now)}, earlier than the running "
            f"build's manifest was issued ({format_instant(running_build_date)}): the clock is "
            "wrong, so expiry cannot be judged"
        )
    if manifest.issued_at > now + MAX_ISSUED_AT_SKEW:
        raise IssuedInFuture(
            f"release refused: manifest {manifest.manifest_version} was issued at "
            f"{format_instant(manifest.issued_at)}, more than "
            f"{MAX_ISSUED_AT_SKEW.total_seconds() / 60:g} minutes after now "
            f"({format_instant(now)}): the signing machine's clock is wrong"
        )
    if now >= manifest.expires:
        raise ManifestExpired(
            f"release refused: manifest {manifest.manifest_version} expired at "
            f"{format_instant(manifest.expires)} (now {format_instant(now)})"
        )
    if floor is not None and manifest.manifest_version <= floor:
        raise ManifestRollback(
            f"release refused: manifest_version {manifest.manifest_version} is not above "
            f"{floor}, the newest this host already accepted (a rollback or replay)"
        )
    if (
        installed_version is not None
        and not manifest.allow_downgrade
        and is_valid_version(installed_version)
        and version_key(manifest.agent_version) < version_key(installed_version)
    ):
        raise VersionDowngrade(
            f"release refused: agent_version {manifest.agent_version} is older than the installed "
            f"{installed_version} and the manifest does not allow a downgrade"
        )
    return VerifiedRelease(
        manifest=manifest, manifest_bytes=manifest_bytes, signature=signature, key_id=signer
    )
