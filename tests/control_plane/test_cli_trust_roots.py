"""`nachtwacht control trust-root publish FILE` and `list` as real processes against a real
database."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.events.trail import Actor
from control_plane.registry import Services
from signed_release.trust_root import MAX_ROOT_BYTES
from tests.control_plane.conftest import sign_release
from tests.control_plane.root_chain import RootChain
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock

OPERATOR = Actor(kind="operator", name="tests")

pytestmark = pytest.mark.slow


def test_a_chain_is_published_from_files_and_listed(database_url: str, tmp_path: Path) -> None:
    chain = RootChain()
    database = ("--database-url", database_url)
    v2 = chain.next(chain.v1)
    (tmp_path / "1.root.json").write_bytes(chain.v1)
    (tmp_path / "2.root.json").write_bytes(v2)
    (tmp_path / "3.root.json").write_bytes(chain.next(v2, signers=chain.root_keys[:1]))

    first = run_control("trust-root", "publish", str(tmp_path / "1.root.json"), *database)
    assert first.returncode == 0, first.stderr
    assert "published trust root v1" in first.stdout
    second = run_control(
        "trust-root", "publish", str(tmp_path / "2.root.json"), "--json", *database
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["version"] == 2
    again = run_control("trust-root", "publish", str(tmp_path / "1.root.json"), *database)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("already published trust root v1")
    assert again.stdout.rstrip().endswith(
        "; nothing changed; the newest is v2, the root agents follow"
    )

    below = run_control("trust-root", "publish", str(tmp_path / "3.root.json"), *database)
    assert below.returncode == 2
    assert len(below.stderr.strip().splitlines()) == 1
    assert "1 valid signatures by the previous root keys (v2), 2 needed" in below.stderr

    listed = run_control("trust-root", "list", "--json", *database)
    assert listed.returncode == 0, listed.stderr
    answer = json.loads(listed.stdout)
    assert [root["version"] for root in answer["roots"]] == [2, 1]
    assert answer["roots"][0]["published_by"].startswith("cli:")
    with psycopg.connect(database_url) as conn:
        stored = conn.execute("SELECT version, body FROM trust_roots ORDER BY version").fetchall()
    assert stored == [(1, chain.v1), (2, v2)]


def test_a_file_larger_than_any_root_is_refused_unread(database_url: str, tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    huge.write_bytes(b" " * (MAX_ROOT_BYTES + 1))
    refused = run_control("trust-root", "publish", str(huge), "--database-url", database_url)
    assert refused.returncode == 2
    assert f"larger than {MAX_ROOT_BYTES} bytes" in refused.stderr
    missing = run_control(
        "trust-root", "publish", str(tmp_path / "absent.json"), "--database-url", database_url
    )
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr


def test_publishing_a_root_that_drops_a_key_warns_with_what_to_do(
    database_url: str, services: Services, clock: ManualClock, tmp_path: Path
) -> None:
    """The pair's current release is signed by the key the new root drops: the root is published
    (exit 0), and the command says so loudly, with the commands that sign the build again."""
    chain = RootChain()
    services.trust_roots.publish(chain.v1, now=clock.now(), actor=OPERATOR)
    release = sign_release(chain.release_key, version="1.6.0", manifest_version=43)
    published = services.releases.publish(
        release.manifest, release.signature, release.artifact, now=clock.now()
    )
    (tmp_path / "2.root.json").write_bytes(
        chain.next(chain.v1, release_key=Ed25519PrivateKey.generate())
    )

    answer = run_control(
        "trust-root", "publish", str(tmp_path / "2.root.json"), "--database-url", database_url
    )
    assert answer.returncode == 0, answer.stderr
    lines = answer.stdout.splitlines()
    assert lines[0].startswith("published trust root v2")
    assert lines[1].startswith("warning: 1 release(s) not withdrawn are signed by a release key")
    assert lines[2].startswith(f"  1.6.0 stable/linux-x86_64 (release {published.id}, ")
    assert "the pair's current release: sign the same build again" in lines[2]
    assert lines[3].strip().startswith("nachtwacht release sign --key release.key --version 1.6.0")
    assert lines[4].strip().startswith("nachtwacht control publish-release release-1.6.0-again/")

    again = run_control(
        "trust-root", "publish", str(tmp_path / "2.root.json"), "--json",
        "--database-url", database_url,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    (found,) = json.loads(again.stdout)["unverifiable_releases"]
    assert (found["release_id"], found["offered_as"]) == (str(published.id), "current")
