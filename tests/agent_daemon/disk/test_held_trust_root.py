"""The held trust root read back with plain json: the same version, expiry and release keys as the
verifying core reads, and a file that cannot be used refused by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from agent_daemon.errors import DaemonStateError
from signed_release.trust_root import read_trust_root
from tests.agent_daemon.trust_roots.chain import RootChain


def test_the_plain_reading_agrees_with_the_verifying_core(tmp_path: Path) -> None:
    chain = RootChain()
    held = HeldTrustRootFile(tmp_path / "trust_root.json")
    held.save(chain.versions[1])
    plain = held.load()
    core = read_trust_root(chain.versions[1])
    assert plain is not None
    assert (plain.version, plain.expires, dict(plain.release_keys), plain.body) == (
        core.version,
        core.expires,
        dict(core.release_keys),
        core.body,
    )
    assert os.stat(held.path).st_mode & 0o777 == 0o644


def test_no_file_is_no_root(tmp_path: Path) -> None:
    assert HeldTrustRootFile(tmp_path / "trust_root.json").load() is None


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(b"{", "not a usable trust root", id="not_json"),
        pytest.param(b'{"signed": {"_type": "targets"}}', "_type 'targets'", id="not_a_root"),
        pytest.param(b"[]", "not a usable trust root", id="a_list"),
    ],
)
def test_a_file_that_is_not_a_root_is_refused_by_name(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "trust_root.json"
    path.write_bytes(content)
    with pytest.raises(DaemonStateError, match=expected) as raised:
        HeldTrustRootFile(path).load()
    assert str(path) in str(raised.value)


def test_a_root_file_others_may_write_is_refused(tmp_path: Path) -> None:
    held = HeldTrustRootFile(tmp_path / "trust_root.json")
    held.save(RootChain().versions[1])
    held.path.chmod(0o664)
    with pytest.raises(DaemonStateError, match="not writable by group or others"):
        held.load()
