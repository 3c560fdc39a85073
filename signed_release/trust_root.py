"""The trust root: which keys may sign releases, itself signed by keys kept offline, in versions.

A trust root is TUF root metadata (python-tuf's `Metadata[Root]`), kept as the exact bytes of its
file. Its `root` role names the root keys and how many of them must sign the next version; its
`targets` role names the **release keys**, whose signature over a release manifest an agent
accepts (the format also requires `snapshot` and `timestamp` roles: they name the release keys
as well and mean nothing here). A release role's threshold is 1: a manifest carries one signature.

The rules a holder follows are TUF's for the root:

- A new version is trusted only when it is exactly one above the held one, and signed by a
  threshold of the held root's root keys *and* a threshold of its own (so a change of the root
  keys is agreed by the old keys and proven possible with the new ones).
- Signatures are counted by distinct public key: one key listed under two key ids counts once.
- Versions are walked one at a time, at most `MAX_ROOT_STEPS` in one walk; intermediate versions
  may have expired, the newest one reached may not (a frozen, expired root vouches for nothing).
- A holder on the older trusted-key files accepts version 1 only, and only when one of the
  release keys it already trusts signed it too: the move to roots needs no hand on the host.

The functions take bytes and return a `TrustRoot` or raise a `TrustRootError` kind naming the
version, what was found and what was expected; none reads a file, the network or the clock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from securesystemslib.signer import CryptoSigner, Signature, SSlibKey
from tuf.api.metadata import TOP_LEVEL_ROLE_NAMES, Metadata, Role, Root
from tuf.api.serialization import DeserializationError
from tuf.api.serialization.json import JSONSerializer

from signed_release.errors import (
    TrustRootChainTooLong,
    TrustRootExpired,
    TrustRootGap,
    TrustRootMalformed,
    TrustRootRollback,
    TrustRootThreshold,
)
from signed_release.manifest import format_instant

__all__ = [
    "MAX_ROOT_BYTES",
    "MAX_ROOT_STEPS",
    "RELEASE_ROLE",
    "ROOT_ROLE",
    "TrustRoot",
    "check_not_expired",
    "first_trust_root",
    "new_trust_root",
    "next_trust_root",
    "read_trust_root",
    "root_signers",
    "self_signed_root",
    "sign_trust_root",
    "signature_count",
    "signatures_by_strangers",
    "signed_by",
    "successor_root",
    "walk_trust_roots",
]

ROOT_ROLE = "root"
# TUF's name for the role whose keys sign what gets installed: here, the release manifests.
RELEASE_ROLE = "targets"
# As python-tuf's client: a walk takes at most this many new versions (the rest, next time).
MAX_ROOT_STEPS = 32
MAX_ROOT_BYTES = 512 * 1024
_MAX_KEYS_PER_ROLE = 64
_HEX_KEY = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, kw_only=True)
class TrustRoot:
    """One version of the trust root, read from its exact bytes."""

    version: int
    expires: datetime
    body: bytes
    # Key id (sha256 of the raw key, as `signed_release.keys.key_id`) → the raw 32-byte key.
    release_keys: Mapping[str, bytes]
    root_key_ids: tuple[str, ...]
    root_threshold: int
    _metadata: Metadata[Root] = field(repr=False, compare=False)

    def is_expired(self, now: datetime) -> bool:
        return now >= self.expires


def _raw_key(key: object, where: str) -> bytes:
    if not isinstance(key, SSlibKey) or key.keytype != "ed25519" or key.scheme != "ed25519":
        raise TrustRootMalformed(
            f"{where}: not an Ed25519 key (expected keytype and scheme ed25519)"
        )
    public = key.keyval.get("public")
    if not isinstance(public, str) or not _HEX_KEY.fullmatch(public):
        raise TrustRootMalformed(f"{where}: keyval.public is not 64 hex digits")
    return bytes.fromhex(public)


def _role_keys(root: Root, role_name: str, version: int) -> dict[str, bytes]:
    """Our key id → raw key of every key the role names (each must be a listed Ed25519 key)."""
    role = root.roles[role_name]
    if len(role.keyids) > _MAX_KEYS_PER_ROLE:
        raise TrustRootMalformed(
            f"trust root v{version}: role {role_name!r} names {len(role.keyids)} keys, "
            f"at most {_MAX_KEYS_PER_ROLE} expected"
        )
    keys: dict[str, bytes] = {}
    for keyid in role.keyids:
        key = root.keys.get(keyid)
        if key is None:
            raise TrustRootMalformed(
                f"trust root v{version}: role {role_name!r} names key {keyid}, which is not listed"
            )
        raw = _raw_key(key, f"trust root v{version}: key {keyid}")
        keys[hashlib.sha256(raw).hexdigest()] = raw
    if role.threshold > len(keys):
        raise TrustRootMalformed(
            f"trust root v{version}: role {role_name!r} has threshold {role.threshold} but only "
            f"{len(keys)} distinct keys: no signing could ever meet it"
        )
    return keys


def read_trust_root(data: bytes) -> TrustRoot:
    """Parse a root file and check its form; no signature is checked (see the other readers)."""
    if len(data) > MAX_ROOT_BYTES:
        raise TrustRootMalformed(
            f"trust root: {len(data)} bytes, at most {MAX_ROOT_BYTES} expected"
        )
    try:
        metadata = Metadata[Root].from_bytes(data)
    except (DeserializationError, ValueError, TypeError, KeyError) as exc:
        raise TrustRootMalformed(f"trust root: not TUF root metadata ({exc})") from exc
    root = metadata.signed
    if not isinstance(root, Root):
        raise TrustRootMalformed(
            f"trust root: the document is {type(root).type!r} metadata, expected 'root'"
        )
    if root.version < 1:
        raise TrustRootMalformed(f"trust root: version {root.version}, expected 1 or more")
    if set(root.roles) != TOP_LEVEL_ROLE_NAMES:
        raise TrustRootMalformed(f"trust root v{root.version}: roles {sorted(root.roles)}")
    root_keys = _role_keys(root, ROOT_ROLE, root.version)
    release_keys = _role_keys(root, RELEASE_ROLE, root.version)
    release_threshold = root.roles[RELEASE_ROLE].threshold
    if release_threshold != 1:
        raise TrustRootMalformed(
            f"trust root v{root.version}: role {RELEASE_ROLE!r} has threshold "
            f"{release_threshold}, expected 1 (a release manifest carries one signature)"
        )
    return TrustRoot(
        version=root.version,
        expires=root.expires.astimezone(UTC),
        body=bytes(data),
        release_keys=release_keys,
        root_key_ids=tuple(root_keys),
        root_threshold=root.roles[ROOT_ROLE].threshold,
        _metadata=metadata,
    )


def root_signers(by: TrustRoot, candidate: TrustRoot) -> frozenset[str]:
    """Key ids of `by`'s root keys whose signature over `candidate` is valid, each key once: what
    is counted against `by`'s root threshold."""
    signed = candidate._metadata
    result = by._metadata.signed.get_verification_result(
        ROOT_ROLE, signed.signed_bytes, signed.signatures
    )
    return frozenset(
        hashlib.sha256(_raw_key(key, "signature key")).hexdigest() for key in result.signed.values()
    )


def signed_by(candidate: TrustRoot, keys: Mapping[str, bytes]) -> frozenset[str]:
    """Those of `keys` (key id → raw key) whose valid signature `candidate` carries."""
    metadata = candidate._metadata
    found: set[str] = set()
    for kid, raw in keys.items():
        key = SSlibKey.from_crypto(Ed25519PublicKey.from_public_bytes(raw))
        signature = metadata.signatures.get(key.keyid)
        if signature is not None and _verifies(key, signature, metadata.signed_bytes):
            found.add(kid)
    return frozenset(found)


def signature_count(candidate: TrustRoot) -> int:
    """How many signatures the file carries, valid or not, by whichever keys."""
    return len(candidate._metadata.signatures)


def signatures_by_strangers(
    candidate: TrustRoot, *named: TrustRoot, raw_keys: Iterable[bytes] = ()
) -> int:
    """How many of `candidate`'s signatures are by keys that neither it, the roots `named`, nor
    `raw_keys` name: whatever they are, they count for nothing."""
    known = {keyid for root in (candidate, *named) for keyid in root._metadata.signed.keys}
    known.update(
        SSlibKey.from_crypto(Ed25519PublicKey.from_public_bytes(raw)).keyid for raw in raw_keys
    )
    return len(set(candidate._metadata.signatures) - known)


def _require_threshold(by: TrustRoot, candidate: TrustRoot, whose: str) -> None:
    signers = root_signers(by, candidate)
    if len(signers) < by.root_threshold:
        raise TrustRootThreshold(
            f"trust root v{candidate.version}: {len(signers)} valid signatures by {whose} root "
            f"keys (v{by.version}), {by.root_threshold} needed"
        )


def self_signed_root(data: bytes) -> TrustRoot:
    """A root whose own root keys meet their threshold: what an agent is given out of band, and
    the first root a control plane stores."""
    candidate = read_trust_root(data)
    _require_threshold(candidate, candidate, "its own")
    return candidate


def next_trust_root(trusted: TrustRoot, data: bytes) -> TrustRoot:
    """The version after `trusted`, verified by a threshold of `trusted`'s root keys and of its
    own."""
    candidate = read_trust_root(data)
    expected = trusted.version + 1
    if candidate.version <= trusted.version:
        raise TrustRootRollback(
            f"trust root v{candidate.version} is not newer than v{trusted.version}, which is held"
        )
    if candidate.version != expected:
        raise TrustRootGap(
            f"trust root v{candidate.version} skips versions: v{expected} is the next to verify"
        )
    _require_threshold(trusted, candidate, "the previous")
    _require_threshold(candidate, candidate, "its own")
    return candidate


def first_trust_root(data: bytes, legacy_release_keys: Mapping[str, bytes]) -> TrustRoot:
    """Version 1, for a holder that trusted release keys before roots existed: self-signed, and
    signed as well by one of those keys (key id → raw key)."""
    candidate = read_trust_root(data)
    if candidate.version != 1:
        raise TrustRootGap(
            f"trust root v{candidate.version}: a holder of trusted-key files starts at v1"
        )
    _require_threshold(candidate, candidate, "its own")
    if signed_by(candidate, legacy_release_keys):
        return candidate
    raise TrustRootThreshold(
        "trust root v1: not signed by any release key this host trusts "
        f"({', '.join(sorted(legacy_release_keys)) or 'none'}); sign it with the current "
        "release key too (`nachtwacht release root-sign --key release.key`)"
    )


def _verifies(key: SSlibKey, signature: Signature, payload: bytes) -> bool:
    try:
        key.verify_signature(signature, payload)
    except Exception:  # securesystemslib raises its own kinds for a bad or malformed signature
        return False
    return True


def check_not_expired(root: TrustRoot, now: datetime) -> None:
    if root.is_expired(now):
        raise TrustRootExpired(
            f"trust root v{root.version} expired at {format_instant(root.expires)} "
            f"(now {format_instant(now)}): no release is accepted until a newer root is published"
        )


def walk_trust_roots(
    trusted: TrustRoot,
    fetch: Callable[[int], bytes | None],
    now: datetime,
    *,
    keep: Callable[[TrustRoot], None] | None = None,
) -> TrustRoot:
    """Follow the chain from `trusted`: `fetch(version)` gives a version's bytes or None (not
    published). `keep` is called with each version verified, before the next is fetched; the
    newest reached is returned and must not be expired."""
    for _ in range(MAX_ROOT_STEPS):
        data = fetch(trusted.version + 1)
        if data is None:
            break
        trusted = next_trust_root(trusted, data)
        if keep is not None:
            keep(trusted)
    else:
        if fetch(trusted.version + 1) is not None:
            raise TrustRootChainTooLong(
                f"trust root: more than {MAX_ROOT_STEPS} new versions in one walk; "
                f"stopped at v{trusted.version}"
            )
    check_not_expired(trusted, now)
    return trusted


# -- making and signing (the release tool) --------------------------------------------------------


def _serialized(metadata: Metadata[Root]) -> bytes:
    return metadata.to_bytes(JSONSerializer(compact=False)) + b"\n"


def new_trust_root(
    *,
    version: int,
    expires: datetime,
    root_keys: Sequence[Ed25519PublicKey],
    root_threshold: int,
    release_keys: Sequence[Ed25519PublicKey],
) -> bytes:
    """An unsigned root document (sign it with `sign_trust_root`)."""
    if version < 1:
        raise ValueError(f"version: {version}, expected 1 or more")
    if not release_keys:
        raise ValueError("release_keys: none given, expected at least one")
    if not 1 <= root_threshold <= len({key.public_bytes_raw() for key in root_keys}):
        raise ValueError(
            f"root_threshold: {root_threshold}, expected 1 to the {len(root_keys)} root keys given"
        )
    root = Root(
        version=version,
        expires=expires.astimezone(UTC),
        keys={},
        roles={name: Role([], 1) for name in TOP_LEVEL_ROLE_NAMES},
        consistent_snapshot=False,
    )
    for key in root_keys:
        root.add_key(SSlibKey.from_crypto(key), ROOT_ROLE)
    for key in release_keys:
        for role in TOP_LEVEL_ROLE_NAMES - {ROOT_ROLE}:
            root.add_key(SSlibKey.from_crypto(key), role)
    root.roles[ROOT_ROLE].threshold = root_threshold
    return _serialized(Metadata(signed=root, signatures={}))


def _public_keys(root: Root, role: str) -> list[Ed25519PublicKey]:
    return [
        Ed25519PublicKey.from_public_bytes(_raw_key(root.keys[keyid], f"key {keyid}"))
        for keyid in root.roles[role].keyids
    ]


def successor_root(
    previous: bytes,
    *,
    expires: datetime,
    root_keys: Sequence[Ed25519PublicKey] | None = None,
    root_threshold: int | None = None,
    release_keys: Sequence[Ed25519PublicKey] | None = None,
) -> bytes:
    """The next version of `previous`, unsigned: the same keys but those given."""
    before = read_trust_root(previous)._metadata.signed
    return new_trust_root(
        version=before.version + 1,
        expires=expires,
        root_keys=root_keys if root_keys is not None else _public_keys(before, ROOT_ROLE),
        root_threshold=(
            root_threshold if root_threshold is not None else before.roles[ROOT_ROLE].threshold
        ),
        release_keys=(
            release_keys if release_keys is not None else _public_keys(before, RELEASE_ROLE)
        ),
    )


def sign_trust_root(data: bytes, private_key: Ed25519PrivateKey) -> bytes:
    """`data` with this key's signature added (or renewed); its other signatures are kept."""
    metadata = read_trust_root(data)._metadata
    metadata.sign(CryptoSigner(private_key), append=True)
    return _serialized(metadata)
