"""A download of several mebibytes holds exactly the signed bytes: the length limit, resume and
hash hold over many reads, against a real loopback server."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_daemon.errors import DownloadFailed, DownloadTooLong
from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.download.staging import part_path
from tests.worlds.artifact_server import ArtifactServer, artifact_server

# Many reads, and not a multiple of any read size.
ARTIFACT = os.urandom(3 * 1024 * 1024 + 12_345)
SHA = hashlib.sha256(ARTIFACT).hexdigest()
LIMITS = DownloadLimits(read_timeout=10.0, deadline=60.0, disk_reserve_bytes=0)


@pytest.fixture
def server() -> Iterator[ArtifactServer]:
    with artifact_server() as running:
        yield running


def _fetch(server: ArtifactServer, tmp_path: Path, **serving: object) -> Path:
    url = server.serve("/artifact", ARTIFACT, **serving)  # type: ignore[arg-type]
    spec = ArtifactSpec(url=url, sha256=SHA, length=len(ARTIFACT), unpacked_size=1000)
    with httpx.Client() as client:
        return download_artifact(
            client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=LIMITS
        )


def test_a_large_download_holds_exactly_the_signed_bytes(
    server: ArtifactServer, tmp_path: Path
) -> None:
    assert _fetch(server, tmp_path).read_bytes() == ARTIFACT


def test_a_large_download_streamed_past_its_length_is_cut_off(
    server: ArtifactServer, tmp_path: Path
) -> None:
    with pytest.raises(DownloadTooLong, match="the server sent more than"):
        _fetch(server, tmp_path, behaviour="overlong_streamed")
    assert not part_path(tmp_path / "staging", SHA).exists()


def test_a_large_download_cut_in_the_middle_resumes_to_the_signed_bytes(
    server: ArtifactServer, tmp_path: Path
) -> None:
    with pytest.raises(DownloadFailed, match="kept to resume"):
        _fetch(server, tmp_path, behaviour="cut_once", cut_after=1_500_000)
    assert part_path(tmp_path / "staging", SHA).stat().st_size == 1_500_000
    assert _fetch(server, tmp_path).read_bytes() == ARTIFACT
    assert server.requests("/artifact")[-1]["range"] == "bytes=1500000-"
