"""A release's patches: checked against its signed manifest on publish, stored beside the artifact,
served by byte range, and the bytes served per release and kind (patch or full) counted.

A patch is keyed by its base's tar sha256, the name the signed manifest gives it
(`signed_release.patch_offer`). Only patches the manifest offers are accepted, each with exactly
its signed length and sha256; a release published without patches serves only its artifact.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Literal
from uuid import UUID

from control_plane.errors import InvalidInput
from control_plane.releases.stored_bytes import read_range
from control_plane.types import Connection, Pool
from signed_release.manifest import Manifest

__all__ = ["ServedKind", "check_patches", "count_served", "read_patch", "store_patches"]

ServedKind = Literal["patch", "full"]


def check_patches(patches: Mapping[str, bytes], parsed: Manifest) -> None:
    """Every patch is one the signed manifest offers, with its signed length and sha256."""
    offers = {offer.base_tar_sha256: offer for offer in parsed.patches}
    for base, content in patches.items():
        offer = offers.get(base)
        if offer is None:
            raise InvalidInput(
                "patches",
                base,
                "is not a base the signed manifest offers a patch from",
                code="release_rejected",
            )
        digest = hashlib.sha256(content).hexdigest()
        if (len(content), digest) != (offer.length, offer.sha256):
            raise InvalidInput(
                "patches",
                f"{len(content)} bytes sha256 {digest[:16]}…",
                f"is not the signed patch from {base[:16]}… ({offer.length} bytes sha256 "
                f"{offer.sha256[:16]}…)",
                code="release_rejected",
            )


def store_patches(
    conn: Connection, release_id: UUID, patches: Mapping[str, bytes], parsed: Manifest
) -> None:
    offers = {offer.base_tar_sha256: offer for offer in parsed.patches}
    for base, content in patches.items():
        conn.execute(
            "INSERT INTO release_patches (release_id, base_tar_sha256, length, sha256, content)"
            " VALUES (%s, %s, %s, %s, %s)",
            [release_id, base, offers[base].length, offers[base].sha256, content],
        )


def read_patch(pool: Pool, release_id: UUID, base: str, start: int, end: int) -> Iterator[bytes]:
    """The bytes `start..end` (inclusive) of one patch, in slices."""
    return read_range(
        pool,
        "SELECT substring(content FROM %s FOR %s) AS part FROM release_patches"
        " WHERE release_id = %s AND base_tar_sha256 = %s",
        [release_id, base],
        start,
        end,
    )


def count_served(pool: Pool, release_id: UUID, kind: ServedKind, size: int) -> None:
    """Add the bytes one download answer carries to its release's count of that kind."""
    if size <= 0:
        return
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO release_bytes_served (release_id, kind, bytes) VALUES (%s, %s, %s)"
            " ON CONFLICT (release_id, kind)"
            " DO UPDATE SET bytes = release_bytes_served.bytes + EXCLUDED.bytes",
            [release_id, kind, size],
        )
