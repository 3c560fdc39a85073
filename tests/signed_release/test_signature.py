from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signed_release.errors import BadSignature, MalformedSignature, UnknownKey
from signed_release.keys import key_id
from signed_release.manifest import Manifest
from signed_release.signature import check_signature, sign_manifest


@pytest.fixture
def signing_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def test_a_signature_by_a_trusted_key_names_that_key(
    manifest: Manifest, signing_key: Ed25519PrivateKey
) -> None:
    data = manifest.to_bytes()
    public = signing_key.public_key()
    assert check_signature(data, sign_manifest(data, signing_key), {key_id(public): public}) == (
        key_id(public)
    )


def test_several_keys_may_be_trusted_for_rotation(
    manifest: Manifest, signing_key: Ed25519PrivateKey
) -> None:
    old = Ed25519PrivateKey.generate().public_key()
    new = signing_key.public_key()
    data = manifest.to_bytes()
    trusted = {key_id(old): old, key_id(new): new}
    assert check_signature(data, sign_manifest(data, signing_key), trusted) == key_id(new)


def test_a_signature_by_an_unpinned_key_is_refused(
    manifest: Manifest, signing_key: Ed25519PrivateKey
) -> None:
    pinned = Ed25519PrivateKey.generate().public_key()
    data = manifest.to_bytes()
    with pytest.raises(UnknownKey, match=key_id(signing_key.public_key())):
        check_signature(data, sign_manifest(data, signing_key), {key_id(pinned): pinned})


def test_a_trusted_key_filed_under_another_id_does_not_vouch(
    manifest: Manifest, signing_key: Ed25519PrivateKey
) -> None:
    data = manifest.to_bytes()
    other = Ed25519PrivateKey.generate().public_key()
    trusted = {key_id(signing_key.public_key()): other}
    with pytest.raises(UnknownKey):
        check_signature(data, sign_manifest(data, signing_key), trusted)


def test_one_changed_manifest_byte_breaks_the_signature(
    manifest: Manifest, signing_key: Ed25519PrivateKey
) -> None:
    data = manifest.to_bytes()
    signature = sign_manifest(data, signing_key)
    public = signing_key.public_key()
    # Same JSON meaning, different bytes: the signature covers bytes, not meaning.
    tampered = data.replace(b'"length": 1234', b'"length":1234')
    with pytest.raises(BadSignature, match="does not match"):
        check_signature(tampered, signature, {key_id(public): public})


def test_a_signature_from_another_manifest_is_refused(
    manifest: Manifest, signing_key: Ed25519PrivateKey
) -> None:
    public = signing_key.public_key()
    other = sign_manifest(b"{}", signing_key)
    with pytest.raises(BadSignature):
        check_signature(manifest.to_bytes(), other, {key_id(public): public})


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(b"not json", "not valid JSON", id="not_json"),
        pytest.param(b'{"key_id": "ab", "signature": "AA=="}', "key_id: 'ab'", id="short_key_id"),
        pytest.param(
            json.dumps({"key_id": "ab" * 32, "signature": 5}).encode(), "signature: 5", id="int"
        ),
        pytest.param(
            json.dumps({"key_id": "ab" * 32, "signature": "***"}).encode(),
            "not valid base64",
            id="bad_base64",
        ),
        pytest.param(
            json.dumps(
                {"key_id": "ab" * 32, "signature": base64.b64encode(b"x" * 10).decode()}
            ).encode(),
            "10 bytes",
            id="wrong_length",
        ),
        pytest.param(
            b'{"key_id": "1", "key_id": "2", "signature": ""}', "key_id: appears", id="duplicate"
        ),
        pytest.param(b"[" * 2000 + b"]" * 2000, "levels deep", id="deeply_nested"),
        pytest.param(b'{"key_id": ' + b"7" * 4000 + b"}", "a number of 4000", id="long_number"),
    ],
)
def test_a_malformed_signature_file_is_refused(
    manifest: Manifest, signing_key: Ed25519PrivateKey, document: bytes, expected: str
) -> None:
    public = signing_key.public_key()
    with pytest.raises(MalformedSignature, match=expected):
        check_signature(manifest.to_bytes(), document, {key_id(public): public})
