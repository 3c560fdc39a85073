"""`nachtwacht release sign` refuses a build larger than the platform takes (`MAX_BUILD_BYTES`)
before reading it: one line naming its size and the bound, and nothing written. The build is a
sparse file: its size is claimed, no gigabyte is ever written."""

from __future__ import annotations

from pathlib import Path

import pytest

from signed_release.artifact import MAX_BUILD_BYTES, describe_artifact
from signed_release.errors import ArtifactError
from tests.signed_release.test_cli import run_cli


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as stream:
        stream.truncate(size)
    return path


@pytest.mark.parametrize("size", [MAX_BUILD_BYTES + 1, 5 * 1024**3])
def test_sign_refuses_a_build_over_the_bound_naming_its_size_and_the_bound(
    tmp_path: Path, size: int
) -> None:
    assert run_cli("keygen", "--out", str(tmp_path / "keys")).returncode == 0
    artifact = _sparse(tmp_path / "agent.tar.gz", size)
    signed = run_cli(
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.5.0",
        "--channel", "stable", "--platform", "linux-x86_64", "--expires-in", "30d",
        "--out", str(tmp_path / "out"), str(artifact),
    )  # fmt: skip
    assert signed.returncode != 0
    assert "Traceback" not in signed.stderr
    assert len(signed.stderr.strip().splitlines()) == 1, signed.stderr
    assert f"{size} bytes" in signed.stderr, signed.stderr
    assert f"{MAX_BUILD_BYTES} bytes" in signed.stderr, signed.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_the_size_is_checked_before_a_byte_is_read(tmp_path: Path) -> None:
    artifact = _sparse(tmp_path / "agent.tar.gz", MAX_BUILD_BYTES + 1)
    with pytest.raises(ArtifactError) as refused:
        describe_artifact(artifact)
    assert str(refused.value) == (
        f"{artifact}: is {MAX_BUILD_BYTES + 1} bytes, larger than the largest build the platform"
        f" takes ({MAX_BUILD_BYTES} bytes)"
    )


def test_a_build_at_the_bound_is_not_refused_for_its_size(tmp_path: Path) -> None:
    artifact = _sparse(tmp_path / "agent.tar.gz", MAX_BUILD_BYTES)
    # Zeros are no tar.gz: refused for that, not for its size.
    with pytest.raises(ArtifactError, match=r"not a tar\.gz"):
        describe_artifact(artifact)
