"""The detached signature: `manifest.sig` is `{"key_id": …, "signature": "<base64>"}`, an Ed25519
signature over the exact bytes of `manifest.json`."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from signed_release.errors import BadSignature, MalformedSignature, ManifestError, UnknownKey
from signed_release.keys import key_id
from signed_release.manifest import strict_json_object

__all__ = ["MAX_SIGNATURE_FILE_BYTES", "check_signature", "sign_manifest", "signature_key_id"]

_KEY_ID = re.compile(r"[0-9a-f]{64}")
MAX_SIGNATURE_FILE_BYTES = 4096


def sign_manifest(manifest_bytes: bytes, private_key: Ed25519PrivateKey) -> bytes:
    """The bytes of `manifest.sig` for these exact manifest bytes."""
    document = {
        "key_id": key_id(private_key.public_key()),
        "signature": base64.b64encode(private_key.sign(manifest_bytes)).decode("ascii"),
    }
    return (json.dumps(document, indent=2, sort_keys=True) + "\n").encode()


def _parse_signature_file(signature_bytes: bytes) -> tuple[str, bytes]:
    try:
        document = strict_json_object(
            signature_bytes, what="signature file", limit=MAX_SIGNATURE_FILE_BYTES
        )
    except ManifestError as exc:
        raise MalformedSignature(str(exc)) from exc
    found_key_id = document.get("key_id")
    if found_key_id is None:
        raise MalformedSignature(
            "has no key_id (expected the manifest.sig `nachtwacht release sign` writes beside "
            "the manifest)"
        )
    if not isinstance(found_key_id, str) or not _KEY_ID.fullmatch(found_key_id):
        raise MalformedSignature(
            f"key_id: {found_key_id!r} is not 64 lower-case hex digits (sha256 of the public key)"
        )
    encoded = document.get("signature")
    if not isinstance(encoded, str):
        raise MalformedSignature(f"signature: {encoded!r} is not a base64 string")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MalformedSignature(f"signature: {encoded[:40]!r} is not valid base64") from exc
    if len(raw) != 64:
        raise MalformedSignature(
            f"signature: decodes to {len(raw)} bytes, expected the 64 bytes of an Ed25519 signature"
        )
    return found_key_id, raw


def signature_key_id(signature_bytes: bytes) -> str:
    """The key id a signature file names (its form checked, not the signature)."""
    return _parse_signature_file(signature_bytes)[0]


def check_signature(
    manifest_bytes: bytes, signature_bytes: bytes, trusted_keys: Mapping[str, Ed25519PublicKey]
) -> str:
    """The id of the trusted key that signed these exact manifest bytes.

    Raises MalformedSignature, UnknownKey (signed by a key not in `trusted_keys`) or BadSignature.
    """
    signer, raw = _parse_signature_file(signature_bytes)
    public_key = trusted_keys.get(signer)
    # The mapping is keyed by id; a key filed under another key's id is not that key.
    if public_key is None or key_id(public_key) != signer:
        raise UnknownKey(signer, list(trusted_keys))
    try:
        public_key.verify(raw, manifest_bytes)
    except InvalidSignature as exc:
        raise BadSignature(
            f"signature: does not match the manifest bytes under key {signer[:16]}… "
            "(the manifest or the signature was altered)"
        ) from exc
    return signer
