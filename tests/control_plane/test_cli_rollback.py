"""`nachtwacht control publish-release --allow-downgrade` and `nachtwacht control rollback` as
real processes against a real database."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from signed_release.keys import generate_key_files, load_private_key
from tests.control_plane.conftest import sign_release
from tests.control_plane.test_cli import run_control

pytestmark = pytest.mark.slow

PAIR = ("--channel", "stable", "--platform", "linux-x86_64")


def _files(
    directory: Path, key: Ed25519PrivateKey, version: str, manifest_version: int, **options: bool
) -> list[str]:
    release = sign_release(key, version=version, manifest_version=manifest_version, **options)
    directory.mkdir()
    paths = []
    for name, content in [
        ("manifest.json", release.manifest),
        ("manifest.sig", release.signature),
        ("build.tar.gz", release.artifact),
    ]:
        (directory / name).write_bytes(content)
        paths.append(str(directory / name))
    return paths


def test_a_downgrade_is_published_only_when_marked_and_rolled_back_to_with_a_reason(
    database_url: str, tmp_path: Path
) -> None:
    private_path, public_path, _ = generate_key_files(tmp_path / "keys")
    key = load_private_key(private_path)
    env = {"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(public_path)}
    database = ("--database-url", database_url)
    for version, manifest_version in (("1.5.0", 42), ("1.6.0", 43)):
        files = _files(tmp_path / f"r{manifest_version}", key, version, manifest_version)
        published = run_control(
            "publish-release", *files, *database, "--stage", "everyone", env=env
        )
        assert published.returncode == 0, published.stderr

    unsigned = run_control("rollback", *PAIR, "--reason", "1.6.0 is bad", *database)
    assert unsigned.returncode == 2
    assert len(unsigned.stderr.strip().splitlines()) == 1
    assert "nachtwacht release sign --key release.key --version 1.5.0" in unsigned.stderr
    assert "nachtwacht control publish-release --allow-downgrade" in unsigned.stderr

    downgrade = _files(tmp_path / "r44", key, "1.5.0", 44, allow_downgrade=True)
    unmarked = run_control("publish-release", *downgrade, *database, env=env)
    assert unmarked.returncode == 2
    assert "1.5.0 is older than 1.6.0" in unmarked.stderr
    assert "--allow-downgrade" in unmarked.stderr

    marked = run_control("publish-release", *downgrade, *database, "--allow-downgrade", env=env)
    assert marked.returncode == 0, marked.stderr
    assert "not offered to anyone yet: a downgrade from 1.6.0; `nachtwacht" in marked.stdout
    assert "nachtwacht control rollback --channel stable --platform linux-x86_64" in marked.stdout

    rolled = run_control("rollback", *PAIR, "--reason", "1.6.0 is bad", "--json", *database)
    assert rolled.returncode == 0, rolled.stderr
    answer = json.loads(rolled.stdout)
    assert (answer["from_version"], answer["to_version"], answer["to_manifest_version"]) == (
        "1.6.0",
        "1.5.0",
        44,
    )
    with psycopg.connect(database_url) as conn:
        row = conn.execute(
            "SELECT actor_kind, actor_name, data->>'reason' FROM events"
            " WHERE kind = 'release.rolled_back'"
        ).fetchone()
    assert row is not None
    assert row[0] == "operator"
    assert str(row[1]).startswith("cli:")
    assert row[2] == "1.6.0 is bad"
