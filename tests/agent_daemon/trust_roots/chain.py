"""A chain of real trust roots for the agent's tests: root keys (threshold 2 of 3), release keys,
each version signed by the previous root keys and its own, made with `signed_release.trust_root`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signed_release.keys import key_id
from signed_release.trust_root import new_trust_root, sign_trust_root, successor_root

__all__ = ["RootChain", "release_key_id", "signed_by"]

FAR = datetime(2030, 1, 1, tzinfo=UTC)


def signed_by(data: bytes, keys: Sequence[Ed25519PrivateKey]) -> bytes:
    for key in keys:
        data = sign_trust_root(data, key)
    return data


@dataclass
class RootChain:
    """`versions[n]` is the exact bytes of root version n (1-based)."""

    root_keys: list[Ed25519PrivateKey] = field(
        default_factory=lambda: [Ed25519PrivateKey.generate() for _ in range(3)]
    )
    release_key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    expires: datetime = FAR
    migration_key: Ed25519PrivateKey | None = None
    versions: dict[int, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unsigned = new_trust_root(
            version=1,
            expires=self.expires,
            root_keys=[key.public_key() for key in self.root_keys],
            root_threshold=2,
            release_keys=[self.release_key.public_key()],
        )
        extra = [self.migration_key] if self.migration_key is not None else []
        self.versions[1] = signed_by(unsigned, [*self.root_keys[:2], *extra])

    @property
    def newest(self) -> int:
        return max(self.versions)

    def next(
        self,
        *,
        release_keys: Sequence[Ed25519PrivateKey] | None = None,
        expires: datetime | None = None,
        signers: Sequence[Ed25519PrivateKey] | None = None,
    ) -> bytes:
        """The next version (release keys replaced where given), signed by two root keys."""
        unsigned = successor_root(
            self.versions[self.newest],
            expires=expires or self.expires,
            release_keys=None
            if release_keys is None
            else [key.public_key() for key in release_keys],
        )
        data = signed_by(unsigned, self.root_keys[:2] if signers is None else signers)
        self.versions[self.newest + 1] = data
        return data

    def extend_to(self, version: int) -> None:
        while self.newest < version:
            self.next()


def release_key_id(key: Ed25519PrivateKey) -> str:
    return key_id(key.public_key())
