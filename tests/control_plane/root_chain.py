"""Signed trust roots for the control plane's tests: root v1 with three root keys (threshold 2)
and one release key, and what follows it, signed with real keys by the product's own tools."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signed_release.trust_root import new_trust_root, sign_trust_root, successor_root

# A year after the tests' clock (2026-11-30).
LATER = datetime(2027, 11, 30, tzinfo=UTC)


def signed(data: bytes, keys: Sequence[Ed25519PrivateKey]) -> bytes:
    for key in keys:
        data = sign_trust_root(data, key)
    return data


class RootChain:
    def __init__(self) -> None:
        self.root_keys = [Ed25519PrivateKey.generate() for _ in range(3)]
        self.release_key = Ed25519PrivateKey.generate()
        self.v1 = signed(
            new_trust_root(
                version=1,
                expires=LATER,
                root_keys=[key.public_key() for key in self.root_keys],
                root_threshold=2,
                release_keys=[self.release_key.public_key()],
            ),
            self.root_keys[:2],
        )

    def next(
        self,
        previous: bytes,
        *,
        expires: datetime = LATER,
        signers: Sequence[Ed25519PrivateKey] | None = None,
        release_key: Ed25519PrivateKey | None = None,
    ) -> bytes:
        """The version after `previous`, same root keys, signed by two of them by default."""
        unsigned = successor_root(
            previous,
            expires=expires,
            release_keys=None if release_key is None else [release_key.public_key()],
        )
        return signed(unsigned, self.root_keys[1:] if signers is None else signers)
