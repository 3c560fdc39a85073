"""Errors of the release format.

    ReleaseError
    ├── ManifestError            the manifest bytes are not a valid manifest
    │   ├── MalformedManifest    not UTF-8 JSON holding one object
    │   ├── DuplicateField       a key appears twice in one object
    │   └── InvalidField         a field is missing, ill-typed or out of range
    ├── SignatureError           the detached signature does not vouch for the manifest
    │   ├── MalformedSignature   the .sig file is not the expected JSON
    │   ├── UnknownKey           signed by a key that is not trusted
    │   └── BadSignature         the signature does not match the manifest bytes
    ├── KeyFileError             a key file cannot be read, has the wrong kind or mode
    ├── TrustRootError           a trust root is not one this holder may trust
    │   ├── TrustRootMalformed   not a root document of the expected form
    │   ├── TrustRootRollback    a version at or below the one held
    │   ├── TrustRootGap         a version that skips one: the chain is walked one at a time
    │   ├── TrustRootThreshold   fewer valid signatures than a role's threshold
    │   ├── TrustRootExpired     the newest root reached has expired
    │   └── TrustRootChainTooLong  more new versions than one walk takes
    └── ArtifactError            an artifact cannot be signed (not a tar.gz agent build)
        └── BuildRefused         a member is not provably safe to unpack (build_archive)

Every message says which field or file, what was found and what was expected.
"""

from __future__ import annotations

__all__ = [
    "ArtifactError",
    "BadSignature",
    "DuplicateField",
    "InvalidField",
    "KeyFileError",
    "MalformedManifest",
    "MalformedSignature",
    "ManifestError",
    "ReleaseError",
    "SignatureError",
    "TrustRootChainTooLong",
    "TrustRootError",
    "TrustRootExpired",
    "TrustRootGap",
    "TrustRootMalformed",
    "TrustRootRollback",
    "TrustRootThreshold",
    "UnknownKey",
]


class ReleaseError(Exception):
    """Base of every error of the release format."""


class ManifestError(ReleaseError):
    """The manifest bytes are not a valid manifest."""


class MalformedManifest(ManifestError):
    """Not UTF-8 JSON holding one object."""


class DuplicateField(ManifestError):
    """A key appears twice in one JSON object: two readers could disagree on its value."""


class InvalidField(ManifestError):
    """A field is missing, has the wrong type or an impossible value."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class SignatureError(ReleaseError):
    """The detached signature does not vouch for the manifest."""


class MalformedSignature(SignatureError):
    """The signature file is not `{"key_id": …, "signature": …}`."""


class UnknownKey(SignatureError):
    """The signature names a key that is not among the trusted keys."""

    def __init__(self, key_id: str, trusted: list[str]) -> None:
        shown = ", ".join(sorted(trusted)) or "none"
        super().__init__(f"key_id: {key_id!r} is not a trusted release key (trusted: {shown})")
        self.key_id = key_id


class BadSignature(SignatureError):
    """The signature does not match the manifest bytes under the named key."""


class KeyFileError(ReleaseError):
    """A key file cannot be read, holds the wrong kind of key or has unsafe permissions."""


class ArtifactError(ReleaseError):
    """The artifact is not an agent build that can be signed."""


class TrustRootError(ReleaseError):
    """A trust root is not one this holder may trust; the root held stays in force."""


class TrustRootMalformed(TrustRootError):
    """Not a root document of the expected form (JSON, roles, keys, sizes)."""


class TrustRootRollback(TrustRootError):
    """A root whose version is at or below the one held: an old root replayed."""


class TrustRootGap(TrustRootError):
    """A root whose version skips one: each version is verified by the one before it."""


class TrustRootThreshold(TrustRootError):
    """Fewer distinct valid signatures than a role's threshold (a key counts once)."""


class TrustRootExpired(TrustRootError):
    """The newest root reached has expired: nothing it vouches for is accepted until a successor
    is published."""


class TrustRootChainTooLong(TrustRootError):
    """More new root versions than one walk takes (an endless chain is an attack)."""
