"""The release keys the agent trusts: read and checked at start, made into keys when an update runs.

A `release.pub` is an Ed25519 public key as SubjectPublicKeyInfo PEM (`signed_release.keys`). Its
DER form is fixed — a 12-byte header naming Ed25519 (RFC 8410), then the 32 raw key bytes — so
the file's format and its key id (sha256 of the raw key, `signed_release.key_id`) are checked at
start without `cryptography`. The key objects are built on first use, when an update verifies a
signature: a daemon that has not updated yet never loads `cryptography`. A file that is not an
Ed25519 public key is still refused at start, naming the file.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from signed_release.errors import KeyFileError
from signed_release.key_file import read_key_file

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

__all__ = ["TrustedKeys", "read_trusted_keys"]

# SEQUENCE { SEQUENCE { OID 1.3.101.112 (Ed25519) }, BIT STRING (0 unused bits) of 32 bytes }.
_ED25519_SPKI_HEADER = bytes.fromhex("302a300506032b6570032100")
_RAW_KEY_BYTES = 32
_PEM_BLOCK = re.compile(
    rb"-----BEGIN PUBLIC KEY-----\r?\n(?P<body>[A-Za-z0-9+/=\s]*?)-----END PUBLIC KEY-----"
)


class TrustedKeys(Mapping[str, "Ed25519PublicKey"]):
    """Key id → Ed25519 public key. The ids are known from the start; each key object is built
    (and `cryptography` imported) the first time it is looked up."""

    def __init__(self, raw_keys: Mapping[str, bytes]) -> None:
        for found_id, raw in raw_keys.items():
            if len(raw) != _RAW_KEY_BYTES or hashlib.sha256(raw).hexdigest() != found_id:
                raise ValueError(f"{found_id!r}: not the key id of a 32-byte Ed25519 key")
        self._raw = dict(raw_keys)
        self._built: dict[str, Ed25519PublicKey] = {}

    @classmethod
    def of(cls, keys: Mapping[str, Ed25519PublicKey]) -> TrustedKeys:
        """From key objects already built (a tool or a test that loaded them itself)."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        raw: dict[str, bytes] = {}
        for found_id, key in keys.items():
            if not isinstance(key, Ed25519PublicKey):
                raise ValueError(f"{found_id!r}: a {type(key).__name__}, expected an Ed25519 key")
            raw[found_id] = key.public_bytes(Encoding.Raw, PublicFormat.Raw)
        return cls(raw)

    def raw(self) -> dict[str, bytes]:
        """Key id → the raw 32-byte key, without building (or importing) anything."""
        return dict(self._raw)

    def __getitem__(self, key_id: str) -> Ed25519PublicKey:
        built = self._built.get(key_id)
        if built is None:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

            built = Ed25519PublicKey.from_public_bytes(self._raw[key_id])
            self._built[key_id] = built
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __eq__(self, other: object) -> bool:
        # By the key bytes: comparing two settings must not build (or import) anything.
        if isinstance(other, TrustedKeys):
            return self._raw == other._raw
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._raw.items()))

    def __repr__(self) -> str:
        return f"TrustedKeys({sorted(self._raw)})"


def _raw_public_key(path: Path) -> bytes:
    data = read_key_file(path, regular_only=True)
    blocks = list(_PEM_BLOCK.finditer(data))
    der = b""
    if len(blocks) == 1:
        try:
            der = base64.b64decode(b"".join(blocks[0]["body"].split()), validate=True)
        except (binascii.Error, ValueError):
            der = b""
    if not der:
        raise KeyFileError(
            f"{path}: not a SubjectPublicKeyInfo PEM public key (expected release.pub)"
        )
    if len(der) != len(_ED25519_SPKI_HEADER) + _RAW_KEY_BYTES or not der.startswith(
        _ED25519_SPKI_HEADER
    ):
        raise KeyFileError(f"{path}: holds another kind of public key, expected an Ed25519 key")
    return der[len(_ED25519_SPKI_HEADER) :]


def read_trusted_keys(paths: Iterable[Path]) -> TrustedKeys:
    """The keys in these `release.pub` files by key id (several at once: rotation); a file that
    is not an Ed25519 public key is a `KeyFileError` naming it."""
    raw: dict[str, bytes] = {}
    for path in paths:
        key = _raw_public_key(Path(path))
        raw[hashlib.sha256(key).hexdigest()] = key
    return TrustedKeys(raw)
