"""The download against a real loopback server: hard stop at `length`, read timeout and deadline,
resume with Range + If-Range (after a close or a reset), start over when Range is ignored, free
space checked first."""

from __future__ import annotations

import hashlib
import os
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agent_daemon.errors import (
    ArtifactMismatch,
    DownloadFailed,
    DownloadStalled,
    DownloadTooLong,
    NotEnoughDisk,
)
from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.download.staging import final_path, part_path
from agent_daemon.updater.failure_reasons import failure_reason
from ground.contract import OutcomeReason
from tests.agent_daemon.scripted_server import ScriptedServer, raw, scripted_server
from tests.worlds.artifact_server import ArtifactServer, artifact_server

ARTIFACT = os.urandom(300_000)
SHA = hashlib.sha256(ARTIFACT).hexdigest()
LIMITS = DownloadLimits(read_timeout=10.0, deadline=60.0, disk_reserve_bytes=0)


@pytest.fixture
def server() -> Iterator[ArtifactServer]:
    with artifact_server() as running:
        yield running


def fetch(
    server: ArtifactServer, tmp_path: Path, limits: DownloadLimits = LIMITS, **serving: object
) -> Path:
    url = server.serve("/artifact", ARTIFACT, **serving)
    spec = ArtifactSpec(url=url, sha256=SHA, length=len(ARTIFACT), unpacked_size=1000)
    with httpx.Client() as client:
        return download_artifact(
            client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=limits
        )


def test_a_download_holds_exactly_the_signed_bytes(server: ArtifactServer, tmp_path: Path) -> None:
    path = fetch(server, tmp_path)
    assert path == final_path(tmp_path / "staging", SHA)
    assert path.read_bytes() == ARTIFACT
    assert not part_path(tmp_path / "staging", SHA).exists()


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        pytest.param("overlong_announced", "the server announces", id="content_length_too_big"),
        pytest.param("overlong_streamed", "the server sent more than", id="streams_past_length"),
    ],
)
def test_a_server_sending_more_than_length_is_cut_off(
    server: ArtifactServer, tmp_path: Path, behaviour: str, expected: str
) -> None:
    with pytest.raises(DownloadTooLong, match=expected):
        fetch(server, tmp_path, behaviour=behaviour)
    assert not part_path(tmp_path / "staging", SHA).exists()
    assert not final_path(tmp_path / "staging", SHA).exists()


def test_a_trickling_server_is_cut_off_at_the_deadline(
    server: ArtifactServer, tmp_path: Path
) -> None:
    limits = DownloadLimits(read_timeout=5.0, deadline=0.5, disk_reserve_bytes=0)
    with pytest.raises(DownloadStalled, match=r"ran past its deadline of 0\.5 s"):
        fetch(server, tmp_path, limits, behaviour="trickle", trickle_interval=0.02)
    # What arrived is kept: a later attempt resumes from it.
    assert 0 < part_path(tmp_path / "staging", SHA).stat().st_size < len(ARTIFACT)


def test_a_silent_server_hits_the_read_timeout(server: ArtifactServer, tmp_path: Path) -> None:
    limits = DownloadLimits(read_timeout=0.3, deadline=60.0, disk_reserve_bytes=0)
    with pytest.raises(DownloadStalled, match=r"no data within 0\.3 s"):
        fetch(server, tmp_path, limits, behaviour="stall")


def test_an_interrupted_download_resumes_with_range_and_if_range(
    server: ArtifactServer, tmp_path: Path
) -> None:
    with pytest.raises(DownloadFailed, match="kept to resume"):
        fetch(server, tmp_path, behaviour="cut_once", cut_after=100_000)
    assert part_path(tmp_path / "staging", SHA).stat().st_size == 100_000
    url_path = "/artifact"
    spec = ArtifactSpec(
        url=server.serve(url_path, ARTIFACT), sha256=SHA, length=len(ARTIFACT), unpacked_size=1
    )
    with httpx.Client() as client:
        path = download_artifact(
            client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=LIMITS
        )
    assert path.read_bytes() == ARTIFACT
    resumed = server.requests(url_path)[-1]
    assert resumed["range"] == "bytes=100000-"
    assert resumed["if-range"] == f'"{SHA}"'


def test_a_server_that_ignores_range_is_downloaded_from_the_start(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    part_path(staging, SHA).write_bytes(ARTIFACT[:50_000])
    path = fetch(server, tmp_path, behaviour="ignore_range")
    assert path.read_bytes() == ARTIFACT
    assert server.requests("/artifact")[-1]["range"] == "bytes=50000-"


def test_a_changed_artifact_is_sent_whole_when_if_range_does_not_match(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    part_path(staging, SHA).write_bytes(b"stale bytes of another build")
    (staging / f"{SHA}.etag").write_text('"an-older-etag"')
    assert fetch(server, tmp_path).read_bytes() == ARTIFACT
    assert server.requests("/artifact")[-1]["if-range"] == '"an-older-etag"'


def test_resumed_bytes_that_hash_wrong_are_discarded(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    # A corrupt prefix that the server (matching ETag) completes: the whole must still hash right.
    part_path(staging, SHA).write_bytes(b"\0" * 1000)
    with pytest.raises(ArtifactMismatch, match="expected the signed"):
        fetch(server, tmp_path)
    assert not part_path(staging, SHA).exists()


def test_not_enough_disk_is_refused_before_a_byte_is_fetched(
    server: ArtifactServer, tmp_path: Path
) -> None:
    limits = DownloadLimits(read_timeout=5.0, deadline=60.0, disk_reserve_bytes=10**18)
    with pytest.raises(NotEnoughDisk, match="bytes free, the update needs"):
        fetch(server, tmp_path, limits)
    assert server.requests("/artifact") == []


def test_an_http_error_is_a_download_failure_naming_the_status(
    server: ArtifactServer, tmp_path: Path
) -> None:
    spec = ArtifactSpec(
        url=server.serve("/artifact", ARTIFACT).replace("/artifact", "/revoked"),
        sha256=SHA,
        length=len(ARTIFACT),
        unpacked_size=1,
    )
    with httpx.Client() as client, pytest.raises(DownloadFailed, match="HTTP 404"):
        download_artifact(
            client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=LIMITS
        )


def test_a_206_for_another_range_is_never_stitched_on(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    part_path(staging, SHA).write_bytes(ARTIFACT[:50_000])
    with pytest.raises(DownloadFailed, match="the next attempt starts over"):
        fetch(server, tmp_path, behaviour="wrong_range")
    assert not part_path(staging, SHA).exists()
    assert fetch(server, tmp_path).read_bytes() == ARTIFACT


def test_a_part_longer_than_the_artifact_is_discarded(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    part_path(staging, SHA).write_bytes(ARTIFACT + b"junk")
    assert fetch(server, tmp_path).read_bytes() == ARTIFACT
    assert "range" not in server.requests("/artifact")[-1]


def test_a_complete_part_is_checked_without_fetching(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    part_path(staging, SHA).write_bytes(ARTIFACT)
    assert fetch(server, tmp_path).read_bytes() == ARTIFACT
    assert server.requests("/artifact") == []


def test_a_finished_download_is_checked_again_before_it_is_used(
    server: ArtifactServer, tmp_path: Path
) -> None:
    staging = tmp_path / "staging"
    staging.mkdir()
    final_path(staging, SHA).write_bytes(b"bit rot")
    assert fetch(server, tmp_path).read_bytes() == ARTIFACT
    assert len(server.requests("/artifact")) == 1


def test_a_connection_reset_mid_body_keeps_the_part_and_the_next_attempt_resumes(
    tmp_path: Path,
) -> None:
    """A reset (RST, not an orderly close) in the middle of the artifact: a download failure that
    may pass, the bytes that came kept, and the next attempt asks only for the rest."""
    head = b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: "%s"\r\n\r\n' % (
        len(ARTIFACT), SHA.encode()
    )  # fmt: skip

    def reset_midway(connection: socket.socket, server: ScriptedServer) -> None:
        connection.sendall(head + ARTIFACT[:100_000])
        time.sleep(0.2)  # the bytes reach the agent before the reset
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    rest = ARTIFACT[100_000:]
    resumed = raw(
        b"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 100000-%d/%d\r\n"
        b'Content-Length: %d\r\nETag: "%s"\r\n\r\n%s'
        % (len(ARTIFACT) - 1, len(ARTIFACT), len(rest), SHA.encode(), rest)
    )
    with scripted_server(reset_midway, resumed) as server, httpx.Client() as client:
        spec = ArtifactSpec(url=server.url(), sha256=SHA, length=len(ARTIFACT), unpacked_size=1)
        staging = tmp_path / "staging"
        with pytest.raises(DownloadFailed, match="kept to resume") as raised:
            download_artifact(client, spec, staging=staging, install_root=tmp_path, limits=LIMITS)
        assert failure_reason(raised.value) == (OutcomeReason.DOWNLOAD_FAILED, True)
        assert part_path(staging, SHA).stat().st_size == 100_000
        path = download_artifact(
            client, spec, staging=staging, install_root=tmp_path, limits=LIMITS
        )
        assert path.read_bytes() == ARTIFACT
        assert b"range: bytes=100000-" in server.requests[-1].lower()
