"""verify_release is pure: bytes, keys and a reference time in; a VerifiedRelease or a specific
refusal out. Tests are named after the attack each refusal stops."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.errors import (
    BadReleaseSignature,
    ClockBehind,
    IssuedInFuture,
    MalformedRelease,
    ManifestExpired,
    ManifestRollback,
    ReleaseRefused,
    UnknownSigningKey,
    VersionDowngrade,
    WrongChannel,
    WrongPlatform,
    WrongProduct,
)
from agent_daemon.updater.verify import MAX_ISSUED_AT_SKEW, verify_release
from signed_release.signature import sign_manifest
from tests.worlds.releases import Release, ReleaseFactory

ISSUED = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
NOW = ISSUED + timedelta(hours=1)


@pytest.fixture
def factory(tmp_path: Path) -> ReleaseFactory:
    return ReleaseFactory(workdir=tmp_path, issued_at=ISSUED)


def release(factory: ReleaseFactory, **options: Any) -> Release:
    return factory.sign(b"artifact bytes", version=options.pop("version", "1.5.0"),
                        manifest_version=options.pop("manifest_version", 42), unpacked_size=10,
                        **options)  # fmt: skip


def verify(factory: ReleaseFactory, data: bytes, signature: bytes, **policy: Any) -> Any:
    arguments: dict[str, Any] = {
        "installed_version": "1.4.1",
        "floor": 41,
        "now": NOW,
        "platform": "linux-x86_64",
        "channel": "stable",
    }
    arguments.update(policy)
    return verify_release(data, signature, factory.trusted, **arguments)


def test_a_good_release_is_verified(factory: ReleaseFactory) -> None:
    good = release(factory)
    verified = verify(factory, good.manifest_bytes, good.signature)
    assert verified.version == "1.5.0"
    assert verified.manifest == good.manifest
    assert verified.manifest_bytes == good.manifest_bytes
    assert verified.key_id in factory.trusted


def test_signed_by_an_unpinned_key(factory: ReleaseFactory) -> None:
    rogue = release(factory, key=Ed25519PrivateKey.generate())
    with pytest.raises(UnknownSigningKey, match="is not a trusted release key"):
        verify(factory, rogue.manifest_bytes, rogue.signature)


def test_manifest_altered_after_signing(factory: ReleaseFactory) -> None:
    good = release(factory)
    altered = good.manifest_bytes.replace(b'"linux-x86_64"', b'"linux-aarch64"')
    with pytest.raises(BadReleaseSignature, match="does not match the manifest bytes"):
        verify(factory, altered, good.signature, platform="linux-aarch64")


def test_signature_file_garbled(factory: ReleaseFactory) -> None:
    good = release(factory)
    with pytest.raises(BadReleaseSignature, match="signature file"):
        verify(factory, good.manifest_bytes, b"\x00garbage")


@pytest.mark.parametrize(
    ("data", "said"),
    [
        pytest.param(
            b'{"manifest_version": 42, "manifest_version": 99}',
            "release refused: manifest field manifest_version: appears more than once",
            id="duplicate_key",
        ),
        pytest.param(
            b"{not json", "release refused: manifest: not valid JSON", id="malformed_json"
        ),
        pytest.param(
            b'{"manifest_version": 42}',
            "release refused: manifest field issued_at: is missing",
            id="missing_fields",
        ),
        pytest.param(
            b'{"a": "' + b"x" * 70_000 + b'"}',
            "release refused: manifest: 70009 bytes is larger than the limit of 65536",
            id="too_large",
        ),
    ],
)
def test_a_signed_but_malformed_manifest(factory: ReleaseFactory, data: bytes, said: str) -> None:
    # Signed by the real key: the signature is good, the content is still refused.
    with pytest.raises(MalformedRelease) as refused:
        verify(factory, data, sign_manifest(data, factory.key))
    assert str(refused.value).startswith(said), refused.value
    assert "manifest manifest" not in str(refused.value)


@pytest.mark.parametrize(
    ("options", "policy", "error", "message"),
    [
        pytest.param({"platform": "linux-aarch64"}, {}, WrongPlatform,
                     "'linux-aarch64' is not this host's 'linux-x86_64'", id="wrong_platform"),
        pytest.param({"channel": "beta"}, {}, WrongChannel,
                     "'beta' is not the followed channel 'stable'", id="wrong_channel"),
        pytest.param({"product": "updater"}, {}, WrongProduct,
                     "product 'updater' is not the 'agent' being updated",
                     id="updater_build_as_the_agent"),
        pytest.param({}, {"product": "updater"}, WrongProduct,
                     "product 'agent' is not the 'updater' being updated",
                     id="agent_build_as_the_updater"),
        pytest.param({"expires_in": timedelta(minutes=59)}, {}, ManifestExpired,
                     "expired at 2026-11-30T02:59:00Z", id="expired"),
        pytest.param({}, {"now": ISSUED + timedelta(days=30)}, ManifestExpired,
                     "expired", id="expires_exactly_now"),
        pytest.param({"manifest_version": 41}, {"floor": 42}, ManifestRollback,
                     "manifest_version 41 is not above 42", id="rollback_below_floor"),
        pytest.param({"manifest_version": 42}, {"floor": 42}, ManifestRollback,
                     "manifest_version 42 is not above 42", id="replay_at_floor"),
        pytest.param({"version": "1.4.0"}, {}, VersionDowngrade,
                     "1.4.0 is older than the installed 1.4.1", id="downgrade"),
        pytest.param({"version": "1.4.1-rc.1"}, {}, VersionDowngrade,
                     "older than the installed", id="downgrade_to_prerelease"),
        pytest.param({}, {"running_build_date": NOW + timedelta(days=400)}, ClockBehind,
                     "the clock is wrong", id="clock_before_running_build"),
    ],
)  # fmt: skip
def test_policy_refusals(
    factory: ReleaseFactory,
    options: dict[str, Any],
    policy: dict[str, Any],
    error: type[ReleaseRefused],
    message: str,
) -> None:
    candidate = release(factory, **options)
    with pytest.raises(error, match=message):
        verify(factory, candidate.manifest_bytes, candidate.signature, **policy)


def test_an_updater_build_is_verified_as_the_updater(factory: ReleaseFactory) -> None:
    candidate = release(factory, product="updater")
    verified = verify(factory, candidate.manifest_bytes, candidate.signature, product="updater")
    assert verified.manifest.product == "updater"


def test_a_downgrade_the_manifest_allows_is_accepted(factory: ReleaseFactory) -> None:
    candidate = release(factory, version="1.4.0", allow_downgrade=True)
    assert verify(factory, candidate.manifest_bytes, candidate.signature).version == "1.4.0"


def test_a_first_install_has_no_floor_and_no_installed_version(factory: ReleaseFactory) -> None:
    candidate = release(factory, manifest_version=1)
    verified = verify(
        factory, candidate.manifest_bytes, candidate.signature, installed_version=None, floor=None
    )
    assert verified.manifest.manifest_version == 1


def test_a_naive_now_is_a_programming_error(factory: ReleaseFactory) -> None:
    candidate = release(factory)
    with pytest.raises(ValueError, match="naive"):
        verify(factory, candidate.manifest_bytes, candidate.signature, now=datetime(2026, 11, 30))


def test_a_manifest_issued_beyond_the_skew_in_the_future(factory: ReleaseFactory) -> None:
    ahead = release(factory, issued_at=NOW + MAX_ISSUED_AT_SKEW + timedelta(seconds=1))
    with pytest.raises(IssuedInFuture, match="the signing machine's clock is wrong"):
        verify(factory, ahead.manifest_bytes, ahead.signature)


def test_a_manifest_issued_within_the_skew_is_accepted(factory: ReleaseFactory) -> None:
    slightly_ahead = release(factory, issued_at=NOW + MAX_ISSUED_AT_SKEW)
    assert verify(factory, slightly_ahead.manifest_bytes, slightly_ahead.signature).version


@pytest.mark.parametrize(
    ("manifest", "signature", "message"),
    [
        pytest.param(b"[" * 5000 + b"]" * 5000, None, "nested 5000 levels deep",
                     id="manifest_nested_5000_deep"),
        pytest.param(b'{"manifest_version": ' + b"4" * 5000 + b"}", None,
                     "a number of 5000 characters", id="manifest_5000_digit_number"),
        pytest.param(None, b'{"key_id": ' + b"[" * 1000 + b"]" * 1000 + b"}",
                     "nested 1001 levels deep", id="signature_nested_1000_deep"),
        pytest.param(None, b'{"key_id": "ab", "signature": ' + b"7" * 4000 + b"}",
                     "a number of 4000 characters", id="signature_4000_digit_number"),
    ],
)  # fmt: skip
def test_a_hostile_release_document_is_refused_not_an_exception(
    factory: ReleaseFactory, manifest: bytes | None, signature: bytes | None, message: str
) -> None:
    good = release(factory)
    data = manifest if manifest is not None else good.manifest_bytes
    sig = signature if signature is not None else sign_manifest(data, factory.key)
    with pytest.raises(ReleaseRefused, match=message):
        verify(factory, data, sig)
