"""`nachtwacht control trust-root publish FILE` and `list` as real processes against a real
database."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from signed_release.trust_root import MAX_ROOT_BYTES
from tests.control_plane.root_chain import RootChain
from tests.control_plane.test_cli import run_control

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
    assert again.stdout.rstrip().endswith("; nothing changed")

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
