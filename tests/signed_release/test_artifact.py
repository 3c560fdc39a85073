from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from nachtwacht.demo_world.demo_agent import build_demo_agent
from signed_release.artifact import describe_artifact
from signed_release.errors import ArtifactError


def test_an_agent_build_is_described_by_length_hash_and_unpacked_size(tmp_path: Path) -> None:
    path = build_demo_agent(tmp_path / "a.tar.gz", version="1.5.0", padding_bytes=5000)
    facts = describe_artifact(path)
    assert facts.length == path.stat().st_size
    assert facts.unpacked_size > 5000
    assert len(facts.sha256) == 64


@pytest.mark.parametrize(
    ("name", "mode", "expected"),
    [
        pytest.param("README", 0o644, "holds no regular file bin/provibr-agent", id="no_agent"),
        pytest.param("bin/provibr-agent", 0o644, "is not executable", id="not_executable"),
    ],
)
def test_an_archive_without_an_executable_agent_cannot_be_signed(
    tmp_path: Path, name: str, mode: int, expected: str
) -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.mode = 2, mode
        archive.addfile(info, io.BytesIO(b"hi"))
    path = tmp_path / "build.tar.gz"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(ArtifactError, match=expected):
        describe_artifact(path)
