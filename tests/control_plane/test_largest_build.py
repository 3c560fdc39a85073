"""The largest build the platform takes (`signed_release.artifact.MAX_BUILD_BYTES`) is one bound
at both publishing doors: a signed manifest naming a longer artifact is refused by
`nachtwacht control publish-release` (before the artifact is read) and by the API, with one line
naming the size and the bound, and nothing is stored. The API's body has room for a build of
that size and its patches, base64. Builds are sparse files: no gigabyte is ever written."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.api.limits import MAX_RELEASE_BODY_BYTES
from control_plane.errors import InvalidInput
from control_plane.registry import Services
from control_plane.types import Pool
from signed_release.artifact import MAX_BUILD_BYTES
from signed_release.manifest import Manifest
from signed_release.patch_offer import PatchOffer, patch_file_name
from signed_release.signature import sign_manifest
from tests.control_plane.conftest import Api, table_rows
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock

WATCHED = ("releases", "release_patches", "events")
ISSUED = datetime(2026, 11, 1, tzinfo=UTC)


def _signed_for(
    key: Ed25519PrivateKey, length: int, patch_length: int | None = None
) -> tuple[bytes, bytes]:
    """A manifest signed by `key` naming an artifact of `length` bytes (and, given
    `patch_length`, a patch of that many bytes), and its signature."""
    patches = (
        ()
        if patch_length is None
        else (
            PatchOffer(
                base_version="1.4.0",
                base_tar_length=1000,
                base_tar_sha256="b" * 64,
                length=patch_length,
                sha256="c" * 64,
            ),
        )
    )
    manifest = Manifest(
        manifest_version=42,
        issued_at=ISSUED,
        expires=ISSUED + timedelta(days=365),
        channel="stable",
        platform="linux-x86_64",
        agent_version="1.5.0",
        length=length,
        # A small artifact is `length` zero bytes; a large one is never read.
        sha256=hashlib.sha256(b"\0" * length if length <= 4096 else b"").hexdigest(),
        unpacked_size=length * 2,
        tar_length=None if patch_length is None else length * 2,
        tar_sha256=None if patch_length is None else "d" * 64,
        patches=patches,
    ).to_bytes()
    return manifest, sign_manifest(manifest, key)


def _refusal_names_size_and_bound(message: str, size: int) -> None:
    assert f"{size} bytes" in message, message
    assert f"{MAX_BUILD_BYTES} bytes" in message, message


def test_the_release_body_has_room_for_the_largest_build_and_as_much_again_in_patches() -> None:
    base64_of_the_build = 4 * -(-MAX_BUILD_BYTES // 3)
    assert 2 * base64_of_the_build <= MAX_RELEASE_BODY_BYTES
    # And PostgreSQL's bytea holds it (1 GB at most).
    assert MAX_BUILD_BYTES < 1024**3


@pytest.mark.parametrize("size", [MAX_BUILD_BYTES + 1, 5 * 1024**3])
def test_the_service_refuses_a_manifest_naming_a_longer_build(
    services: Services, pool: Pool, release_key: Ed25519PrivateKey, clock: ManualClock, size: int
) -> None:
    manifest, signature = _signed_for(release_key, size)
    before = table_rows(pool, WATCHED)
    with pytest.raises(InvalidInput) as refused:
        services.releases.publish(manifest, signature, b"", now=clock.now())
    assert str(refused.value).startswith("artifact: "), refused.value
    _refusal_names_size_and_bound(str(refused.value), size)
    assert table_rows(pool, WATCHED) == before


def test_the_api_refuses_a_manifest_naming_a_longer_build(
    api: Api, pool: Pool, operator_key: str, release_key: Ed25519PrivateKey
) -> None:
    size = MAX_BUILD_BYTES + 1
    manifest, signature = _signed_for(release_key, size)
    before = table_rows(pool, WATCHED)
    with api.client(operator_key) as client:
        answer = client.post(
            "/v1/admin/releases",
            json={
                "manifest_b64": base64.b64encode(manifest).decode(),
                "signature_b64": base64.b64encode(signature).decode(),
                "artifact_b64": base64.b64encode(b"not the build").decode(),
            },
        )
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail["field"] == "artifact"
    _refusal_names_size_and_bound(detail["message"], size)
    assert table_rows(pool, WATCHED) == before


@pytest.mark.slow
@pytest.mark.parametrize("size", [MAX_BUILD_BYTES + 1, 5 * 1024**3], ids=["one_over", "5GiB"])
def test_publish_release_refuses_a_longer_build_before_reading_it(
    database_url: str, tmp_path: Path, size: int
) -> None:
    from signed_release.keys import generate_key_files, load_private_key

    private_path, public_path, _ = generate_key_files(tmp_path / "keys")
    manifest, signature = _signed_for(load_private_key(private_path), size)
    (tmp_path / "manifest.json").write_bytes(manifest)
    (tmp_path / "manifest.sig").write_bytes(signature)
    with (tmp_path / "agent.tar.gz").open("wb") as stream:
        stream.truncate(size)
    result = _publish_refused(tmp_path, database_url, public_path)
    assert result.stderr.startswith("nachtwacht control publish-release: ARTIFACT: ")
    _refusal_names_size_and_bound(result.stderr, size)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM releases").fetchone() == (0,)


def _publish_refused(
    tmp_path: Path, database_url: str, public_path: Path
) -> subprocess.CompletedProcess[str]:
    """`publish-release` of the files in `tmp_path`, refused in one line without a trace."""
    result = run_control(
        "publish-release", str(tmp_path / "manifest.json"), str(tmp_path / "manifest.sig"),
        str(tmp_path / "agent.tar.gz"), "--database-url", database_url,
        "--release-public-key", str(public_path),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    return result


@pytest.mark.slow
@pytest.mark.parametrize("size", [MAX_BUILD_BYTES + 1, 5 * 1024**3], ids=["one_over", "5GiB"])
def test_a_patch_offered_longer_than_the_largest_build_is_refused_unread(
    database_url: str, tmp_path: Path, size: int
) -> None:
    from signed_release.keys import generate_key_files, load_private_key

    private_path, public_path, _ = generate_key_files(tmp_path / "keys")
    manifest, signature = _signed_for(load_private_key(private_path), 1000, patch_length=size)
    (tmp_path / "manifest.json").write_bytes(manifest)
    (tmp_path / "manifest.sig").write_bytes(signature)
    (tmp_path / "agent.tar.gz").write_bytes(b"\0" * 1000)
    with (tmp_path / patch_file_name("b" * 64)).open("wb") as stream:
        stream.truncate(size)
    result = _publish_refused(tmp_path, database_url, public_path)
    _refusal_names_size_and_bound(result.stderr, size)
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM releases").fetchone() == (0,)
