"""Publishing a release: refused unless its signature, artifact, expiry and version check out."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import build_services
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release
from tests.worlds.clocks import ManualClock


def _publish(api: Api, operator_key: str, release: SignedRelease) -> tuple[int, dict[str, object]]:
    with api.client(operator_key) as client:
        response = client.post(
            "/v1/admin/releases",
            json={
                "manifest_b64": base64.b64encode(release.manifest).decode(),
                "signature_b64": base64.b64encode(release.signature).decode(),
                "artifact_b64": base64.b64encode(release.artifact).decode(),
            },
        )
    return response.status_code, response.json()


def test_a_signed_release_is_published_and_named_in_agent_config(
    api: Api,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    status, body = _publish(api, operator_key, sign_release(release_key))
    assert status == 201
    assert body["version"] == "1.5.0"
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        config = client.get("/v1/agent/config").json()
    assert config["release"] == {
        "version": "1.5.0",
        "manifest_version": 42,
        "channel": "stable",
        "platform": "linux-x86_64",
    }


def _tampered_manifest(release: SignedRelease) -> SignedRelease:
    return replace(release, manifest=release.manifest.replace(b'"1.5.0"', b'"9.9.9"'))


def _other_key(release: SignedRelease) -> SignedRelease:
    return sign_release(Ed25519PrivateKey.generate())


def _short_artifact(release: SignedRelease) -> SignedRelease:
    return replace(release, artifact=release.artifact[:-1])


def _swapped_artifact(release: SignedRelease) -> SignedRelease:
    return replace(release, artifact=bytes(reversed(release.artifact)))


@pytest.mark.parametrize(
    ("attack", "field", "words"),
    [
        pytest.param(
            _tampered_manifest, "signature", "does not match the manifest bytes", id="tampered"
        ),
        pytest.param(_other_key, "signature", "key", id="unknown_key"),
        pytest.param(
            _short_artifact, "artifact", "does not match the manifest's length", id="short"
        ),
        pytest.param(
            _swapped_artifact, "artifact", "does not match the manifest's sha256", id="swapped"
        ),
    ],
)
def test_a_release_that_cannot_be_verified_is_refused(
    api: Api,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    attack: Callable[[SignedRelease], SignedRelease],
    field: str,
    words: str,
) -> None:
    status, body = _publish(api, operator_key, attack(sign_release(release_key)))
    assert status == 422
    detail = body["detail"]
    assert isinstance(detail, dict)
    assert detail["code"] == "release_rejected"
    assert detail["field"] == field
    assert words in str(detail["message"])


def test_an_expired_manifest_is_refused(
    api: Api, clock: ManualClock, operator_key: str, release_key: Ed25519PrivateKey
) -> None:
    clock.set(datetime(2027, 11, 1, tzinfo=UTC))
    status, body = _publish(api, operator_key, sign_release(release_key))
    assert status == 422
    assert "expired" in str(body["detail"])


@pytest.mark.parametrize(
    "manifest_version", [pytest.param(41, id="older"), pytest.param(42, id="same")]
)
def test_a_manifest_not_newer_than_the_current_is_refused(
    api: Api,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    manifest_version: int,
) -> None:
    older = sign_release(release_key, version="1.4.9", manifest_version=manifest_version)
    status, body = _publish(api, operator_key, older)
    assert status == 409
    assert "is not newer" in str(body["detail"])


def test_without_trusted_keys_nothing_is_published(pool: Pool, clock: ManualClock) -> None:
    from control_plane.errors import InvalidInput

    services = build_services(pool)
    release = sign_release(Ed25519PrivateKey.generate())
    with pytest.raises(InvalidInput, match="no release public key is configured"):
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now()
        )


def test_bad_base64_is_named(api: Api, operator_key: str) -> None:
    with api.client(operator_key) as client:
        response = client.post(
            "/v1/admin/releases",
            json={"manifest_b64": "!!!", "signature_b64": "", "artifact_b64": ""},
        )
    assert response.status_code == 422
    assert "manifest_b64" in response.json()["detail"]["message"]
