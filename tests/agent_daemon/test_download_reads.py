"""The download's own connection reads up to a mebibyte at once (httpcore reads 64 KiB), and the
length limit, resume and hash still hold with chunks that large, against a real loopback server.

The read size reaches into httpx's and httpcore's streams (they offer no setting for it): the
first test fails when an upgrade moves them, instead of the download silently reading 64 KiB
again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from agent_daemon.errors import DownloadFailed, DownloadTooLong
from agent_daemon.updater.download import (
    _READ_BYTES,
    ArtifactSpec,
    DownloadLimits,
    _read_bigger,
    download_artifact,
)
from agent_daemon.updater.download_staging import part_path
from tests.worlds.artifact_server import ArtifactServer, artifact_server

# Several reads of the larger size, and not a multiple of it.
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


def test_the_downloads_connection_reads_a_mebibyte_at_once(server: ArtifactServer) -> None:
    url = server.serve("/artifact", ARTIFACT)
    with (
        httpx.Client() as client,
        client.stream("GET", url, headers={"Connection": "close"}) as response,
    ):
        _read_bigger(response)
        stream: Any = response.stream  # httpx's and httpcore's private streams, as the code reaches
        connection = stream._stream._httpcore_stream._stream._connection
        assert isinstance(connection, httpcore.HTTP11Connection)
        assert connection.READ_NUM_BYTES == _READ_BYTES
        assert b"".join(response.iter_raw()) == ARTIFACT
        # httpcore's own default, for every other connection, is left alone.
        assert httpcore.HTTP11Connection.READ_NUM_BYTES == 64 * 1024


def test_a_response_of_another_shape_keeps_its_reads() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=b"build"))
    with httpx.Client(transport=transport) as client, client.stream("GET", "http://x/") as response:
        _read_bigger(response)  # no connection of httpcore's to reach: nothing to change
        assert response.read() == b"build"


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
