"""The agent's updater under attack: every input from the network (the control plane's answer,
whatever answers the artifact request) and from a signed build that the happy path did not imagine.

Each test is named after its attack and asserts three things: the outcome (never an exception),
that nothing else changed (`current` still the working version, no update left in progress), and
that the next release still installs — nothing may leave the updater unable to take it.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.updater.step_machine import MAX_RUN_ATTEMPTS
from agent_daemon.updater.update_records import UpdateRequest
from agent_daemon.updater.updater import Updater
from ground.clock import SystemClock
from ground.contract import NOT_THE_BUILDS_FAILURE, OutcomeReason
from signed_release.signature import sign_manifest
from tests.agent_daemon.scripted_server import Script, head_then, raw, scripted_server
from tests.agent_daemon.updater_support.host import Host, host_running
from tests.worlds.releases import Release


def assert_untouched(host: Host, outcome_version: str | None, old: str = "1.4.1") -> None:
    """The attack changed nothing: the old version runs, nothing is left in progress."""
    assert outcome_version == old
    assert host.current() == f"versions/{old}"
    assert host.running_version() == old
    assert host.state()["in_progress"] is None


def assert_next_release_installs(host: Host, version: str = "1.6.0", number: int = 60) -> None:
    outcome = host.apply(host.factory.release(version, number), f"run-next-{version}")
    assert (outcome.status, outcome.version, outcome.error) == ("succeeded", version, None)
    assert host.running_version() == version


def request_at(release: Release, run_id: str, url: str) -> UpdateRequest:
    return UpdateRequest(
        run_id=run_id,
        manifest=release.manifest_bytes,
        signature=release.signature,
        artifact_url=url,
    )


def script_build(script: str) -> bytes:
    """A build whose entry point is the given shell script."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = script.encode()
        entry = tarfile.TarInfo("bin/provibr-agent")
        entry.size, entry.mode = len(data), 0o755
        archive.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


# -- URLs the control plane sends ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        pytest.param("http://[::1/artifact", id="unclosed_ipv6_bracket"),
        pytest.param("http://127.0.0.1:99999/artifact", id="port_out_of_range"),
        pytest.param("http://127.0.0.1:-1/artifact", id="negative_port"),
        pytest.param("http://exa mple.test/artifact", id="space_in_host"),
        pytest.param("http://127.0.0.1/a\x00b", id="nul_in_path"),
        pytest.param("http://127.0.0.1/a\r\nX-Injected: 1", id="header_injection"),
        pytest.param("http://user:secret@127.0.0.1/artifact", id="userinfo"),
        pytest.param("http://127.0.0.1/" + "a" * 5000, id="five_thousand_characters"),
        pytest.param("http://" + "\u00e9" * 70 + ".test/a", id="idna_label_too_long"),
        pytest.param("ftp://127.0.0.1/artifact", id="ftp_scheme"),
    ],
)
def test_an_artifact_url_httpx_cannot_use_is_refused_before_anything_is_stored(
    tmp_path: Path, url: str
) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        outcome = host.updater().apply(request_at(release, "run-1", url))
        assert outcome.status == "failed"
        assert (outcome.error or "").startswith("artifact_url: ")
        assert len(outcome.error or "") < 400
        assert_untouched(host, outcome.version)
        assert host.state()["floor"] == 41
        assert_next_release_installs(host)


# -- headers and bodies of whatever answers the artifact request ---------------------------------


def _ok_head(length: int, extra: bytes = b"") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n".encode() + extra


def test_a_content_range_of_five_thousand_digits_is_a_failed_download(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        staging = host.state_dir / "staging"
        staging.mkdir(parents=True, exist_ok=True)
        (staging / f"{release.manifest.sha256}.part").write_bytes(release.artifact[:500])
        rest = release.artifact[500:]
        absurd = (
            f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(rest)}\r\nConnection: close\r\n"
            f"Content-Range: bytes {'9' * 5000}-{len(release.artifact) - 1}/"
            f"{len(release.artifact)}\r\n"
        ).encode()
        with scripted_server(head_then(absurd, rest)) as server:
            outcome = host.updater().apply(request_at(release, "run-1", server.url()))
        assert outcome.status == "failed"
        assert "Content-Range" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert_next_release_installs(host)


@pytest.mark.parametrize(
    "length",
    [
        pytest.param("9" * 5000, id="five_thousand_digits"),
        pytest.param("-5", id="negative"),
        pytest.param("12, 13", id="two_values"),
    ],
)
def test_an_absurd_content_length_is_a_failed_download(tmp_path: Path, length: str) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\nConnection: close\r\n".encode()
        with scripted_server(head_then(head, release.artifact)) as server:
            outcome = host.updater().apply(request_at(release, "run-1", server.url()))
        assert outcome.status == "failed"
        assert "download of" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert_next_release_installs(host)


def test_a_non_ascii_etag_is_never_sent_back_and_the_download_resumes(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        artifact = release.artifact
        # Latin-1 in the ETag, then the connection drops after 500 bytes of the body.
        cut = _ok_head(len(artifact), b'ETag: "caf\xe9"\r\n')
        rest = artifact[500:]
        resumed = (
            f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(rest)}\r\nConnection: close\r\n"
            f"Content-Range: bytes 500-{len(artifact) - 1}/{len(artifact)}\r\n"
        ).encode()
        with scripted_server(head_then(cut, artifact[:500]), head_then(resumed, rest)) as server:
            request = request_at(release, "run-1", server.url())
            first = host.updater().apply(request)
            assert first.status == "failed"
            assert "kept to resume" in (first.error or "")
            second = host.updater().apply(request)
            assert (second.status, second.version) == ("succeeded", "1.5.0")
            resume_head = server.requests[-1].decode("latin-1").lower()
        assert "range: bytes=500-" in resume_head
        assert f'if-range: "{release.manifest.sha256}"' in resume_head
        assert host.running_version() == "1.5.0"


def test_a_body_labelled_gzip_is_stored_as_sent_never_inflated(tmp_path: Path) -> None:
    """A misconfigured web server labels the .tar.gz `Content-Encoding: gzip`: the signed bytes
    are the stored ones, so they install; inflating them would have failed the hash."""
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        head = _ok_head(len(release.artifact), b"Content-Encoding: gzip\r\n")
        with scripted_server(head_then(head, release.artifact)) as server:
            outcome = host.updater().apply(request_at(release, "run-1", server.url()))
        assert (outcome.status, outcome.version) == ("succeeded", "1.5.0")


def test_a_gzip_bomb_is_never_inflated(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        # 1 KiB on the wire, 50 MB once inflated: only the signed length may ever be held.
        bomb = gzip.compress(b"\0" * 50_000_000)[: release.manifest.length]
        head = _ok_head(len(bomb), b"Content-Encoding: gzip\r\n")
        with scripted_server(head_then(head, bomb)) as server:
            outcome = host.updater().apply(request_at(release, "run-1", server.url()))
        assert (outcome.status, outcome.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
        assert "expected the signed" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert_next_release_installs(host)


def test_a_body_shorter_than_its_content_length_keeps_the_part_and_fails(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        head = _ok_head(len(release.artifact))
        with scripted_server(head_then(head, release.artifact[:100])) as server:
            outcome = host.updater().apply(request_at(release, "run-1", server.url()))
        assert outcome.status == "failed"
        assert "kept to resume" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert_next_release_installs(host)


def test_a_redirect_is_not_followed_with_the_credential(tmp_path: Path) -> None:
    with host_running(tmp_path) as host, scripted_server() as elsewhere:
        release = host.factory.release("1.5.0", 42)
        redirect = raw(
            f"HTTP/1.1 302 Found\r\nLocation: {elsewhere.url()}\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        with scripted_server(redirect) as server:
            client = httpx.Client(base_url=server.origin, headers={"Authorization": "Bearer nwa_x"})
            updater = Updater(settings=host.settings, client=client, clock=SystemClock())
            outcome = updater.apply(request_at(release, "run-1", server.url()))
        assert outcome.status == "failed"
        assert "a redirect (302 Found to " in (outcome.error or "")
        assert elsewhere.requests == []
        assert_untouched(host, outcome.version)


PORTAL_PAGE = b"<!DOCTYPE html><html><body><h1>Welcome to Hotel Wi-Fi</h1>Log in</body></html>"
NOT_THE_BUILD = "where the build was expected: a proxy or captive portal in the way?"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        pytest.param(
            head_then(_ok_head(len(PORTAL_PAGE), b"Content-Type: text/html\r\n"), PORTAL_PAGE),
            "an HTML page (200 OK, text/html) answered",
            id="html_content_type",
        ),
        pytest.param(
            head_then(_ok_head(len(PORTAL_PAGE)), PORTAL_PAGE),
            f"an HTML page ({len(PORTAL_PAGE)} bytes, not a gzip stream) answered",
            id="html_without_its_type",
        ),
        pytest.param(
            head_then(_ok_head(12, b"Content-Type: application/gzip\r\n"), b"Log in here\n"),
            "12 bytes that are not a gzip stream answered",
            id="not_gzip_at_all",
        ),
        pytest.param(
            raw(
                b"HTTP/1.1 302 Found\r\nLocation: http://portal.example/login\r\n"
                b"Content-Length: 0\r\nConnection: close\r\n\r\n"
            ),
            "a redirect (302 Found to http://portal.example/login, never followed) answered",
            id="redirect",
        ),
    ],
)
def test_what_is_plainly_not_the_build_is_a_download_failure_never_a_verification_failure(
    tmp_path: Path, answer: Script, said: str
) -> None:
    """A captive portal's page or its redirect where the artifact is expected says nothing of the
    release: a failed download naming what answered (tried again in the window, counted towards
    no halt), never "tampered, or another release's artifact"."""
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        with scripted_server(answer) as server:
            url = server.url()
            outcome = host.updater().apply(request_at(release, "run-1", url))
        assert (outcome.status, outcome.reason, outcome.retry) == (
            "failed",
            OutcomeReason.DOWNLOAD_FAILED,
            True,
        )
        error = outcome.error or ""
        assert f"download of {url} failed: {said} {NOT_THE_BUILD}" in error, error
        assert "tampered" not in error
        assert "<" not in error
        assert_untouched(host, outcome.version)
        assert not list((host.state_dir / "staging").glob("*.part"))
        assert OutcomeReason.DOWNLOAD_FAILED in NOT_THE_BUILDS_FAILURE
        assert_next_release_installs(host)


def test_a_gzip_stream_that_is_not_the_signed_one_is_still_a_verification_failure(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        # The signed length, a gzip stream's start, one byte changed: tampered on the way.
        middle = len(release.artifact) // 2
        tampered = bytearray(release.artifact)
        tampered[middle] ^= 0xFF
        with scripted_server(head_then(_ok_head(len(tampered)), bytes(tampered))) as server:
            outcome = host.updater().apply(request_at(release, "run-1", server.url()))
        assert (outcome.status, outcome.reason, outcome.retry) == (
            "failed",
            OutcomeReason.VERIFICATION_FAILED,
            False,
        )
        assert "(tampered, or another release's artifact)" in (outcome.error or "")
        assert OutcomeReason.VERIFICATION_FAILED not in NOT_THE_BUILDS_FAILURE
        assert_untouched(host, outcome.version)
        assert_next_release_installs(host)


# -- what a signed build does ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param("#!/bin/sh\nprintf '\\377\\376\\n'\n", "printed '\ufffd\ufffd'",
                     id="undecodable_bytes"),
        pytest.param("#!/bin/sh\nhead -c 30000000 /dev/zero | tr '\\0' x\n", "printed 'xxx",
                     id="thirty_megabytes_of_output"),
        pytest.param("#!/bin/sh\nsleep 600 &\necho 1.5.0\n", "did not finish",
                     id="child_holds_the_output_open"),
    ],
)  # fmt: skip
def test_a_self_test_that_misbehaves_is_a_failed_self_test(
    tmp_path: Path, script: str, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agent_daemon.updater.install.SELF_TEST_TIMEOUT_SECONDS", 2.0)
    with host_running(tmp_path) as host:
        release = host.factory.sign(script_build(script), version="1.5.0", manifest_version=42)
        outcome = host.apply(release, "run-1")
        assert outcome.status == "failed"
        assert "self-test of 1.5.0 failed" in (outcome.error or "")
        assert expected in (outcome.error or "")
        assert len(outcome.error or "") <= 1000
        assert_untouched(host, outcome.version)
        assert "1.5.0" in host.state()["bad_versions"]
        assert_next_release_installs(host)


def test_a_health_command_printing_undecodable_bytes_is_rolled_back(tmp_path: Path) -> None:
    build = script_build(
        "#!/bin/sh\n"
        'case "$1" in\n'
        "  --version) echo 1.5.0 ;;\n"
        "  health) printf '\\377\\376\\n'; exit 0 ;;\n"
        "  *) exec sleep 600 ;;\n"
        "esac\n"
    )
    with host_running(tmp_path) as host:
        release = host.factory.sign(build, version="1.5.0", manifest_version=42)
        updater = host.updater(health_deadline_seconds=2.0)
        outcome = updater.apply(host.request(release, "run-1"))
        assert outcome.status == "rolled_back"
        assert "printed '\ufffd\ufffd'" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert_next_release_installs(host)


# -- the release documents (item 7: parsers bounded before parsing) -------------------------------


def test_a_deeply_nested_signature_file_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        nested = b'{"key_id": ' + b"[" * 1000 + b"]" * 1000 + b"}"
        outcome = host.apply(replace(release, signature=nested), "run-1")
        assert outcome.status == "failed"
        assert "nested 1001 levels deep" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert host.server.requests("/v1/agent/runs/run-1/artifact") == []


def test_a_signed_manifest_with_a_five_thousand_digit_number_is_refused(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release = host.factory.release("1.5.0", 42)
        signed_length = f'"length": {release.manifest.length},'.encode()
        assert signed_length in release.manifest_bytes
        data = release.manifest_bytes.replace(signed_length, b'"length": ' + b"1" * 5001 + b",")
        outcome = host.apply(
            replace(release, manifest_bytes=data, signature=sign_manifest(data, host.factory.key)),
            "run-1",
        )
        assert outcome.status == "failed"
        assert "a number of 5001 characters" in (outcome.error or "")
        assert_untouched(host, outcome.version)


def test_a_manifest_issued_in_the_future_never_becomes_the_running_builds_date(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        ahead = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
        future = host.factory.release("1.5.0", 42, issued_at=ahead)
        outcome = host.apply(future, "run-1")
        assert outcome.status == "failed"
        assert "the signing machine's clock is wrong" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        # Correctly dated releases are not refused against the future date (ClockBehind).
        assert_next_release_installs(host)


# -- the clock the control plane shows (item 4) ----------------------------------------------------


def test_a_server_turning_its_clock_back_cannot_make_an_expired_manifest_install(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        # Expired an hour ago by the host's clock; replayed with a server time three hours back.
        now = datetime.now(UTC)
        replayed = host.factory.release(
            "1.5.0",
            42,
            issued_at=now - timedelta(days=2),
            expires_in=timedelta(days=2, hours=-1),
        )
        server_clock = ServerClock(SystemClock())
        server_clock.learn(now - timedelta(hours=3), local_time=now)
        assert server_clock.now() < replayed.manifest.expires  # the server's word alone: fresh
        updater = Updater(
            settings=host.settings, client=httpx.Client(), clock=server_clock.expiry_clock()
        )
        outcome = updater.apply(host.request(replayed, "run-1"))
        assert outcome.status == "failed"
        assert "expired" in (outcome.error or "")
        assert_untouched(host, outcome.version)


# -- failures the steps did not expect, and interruptions (item 1) --------------------------------


@pytest.mark.parametrize(
    ("step", "status"),
    [
        pytest.param("accepted", "failed", id="before_the_download"),
        pytest.param("downloaded", "failed", id="before_the_install"),
        pytest.param("installed", "failed", id="before_the_switch"),
        pytest.param("switched", "rolled_back", id="after_the_switch"),
    ],
)
def test_an_unexpected_exception_at_any_step_ends_as_an_outcome(
    tmp_path: Path, step: str, status: str
) -> None:
    with host_running(tmp_path) as host:

        def defect(at: str) -> None:
            if at == step:
                raise RuntimeError(f"a defect at {at}")

        updater = Updater(
            settings=host.settings, client=httpx.Client(), clock=SystemClock(), on_step=defect
        )
        outcome = updater.apply(host.request(host.factory.release("1.5.0", 42), "run-1"))
        assert outcome.status == status
        assert f"RuntimeError: a defect at {step}" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert not list((host.install_root / "versions").glob(".*.tmp"))
        assert_next_release_installs(host)


def test_an_update_interrupted_again_and_again_is_given_up_and_rolled_back(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host:
        interruptions = [0]

        def link_fails(at: str) -> None:
            # The first MAX_RUN_ATTEMPTS switches fail half-way (e.g. a read-only install root).
            if at == "between_links" and interruptions[0] < MAX_RUN_ATTEMPTS:
                interruptions[0] += 1
                raise OSError(30, "Read-only file system", "current")

        def updater() -> Updater:
            return Updater(
                settings=host.settings,
                client=httpx.Client(),
                clock=SystemClock(),
                on_step=link_fails,
            )

        first = updater().apply(host.request(host.factory.release("1.5.0", 42), "run-1"))
        assert first.status == "failed"
        assert "update interrupted" in (first.error or "")
        for _ in range(MAX_RUN_ATTEMPTS - 1):
            assert host.state()["in_progress"]["step"] == "switching"
            with pytest.raises(OSError, match="Read-only"):
                updater().resume()
        given_up = updater().resume()
        assert given_up is not None
        assert given_up.status == "rolled_back"
        assert f"given up after {MAX_RUN_ATTEMPTS} attempts" in (given_up.error or "")
        assert_untouched(host, given_up.version)
        assert "1.5.0" in host.state()["bad_versions"]
        assert updater().resume() is None
        assert_next_release_installs(host)


# -- the umask (item 8) ----------------------------------------------------------------------------


def test_a_restrictive_callers_umask_does_not_reach_the_install(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        previous = os.umask(0o077)
        try:
            outcome = host.apply(host.factory.release("1.5.0", 42), "run-1")
        finally:
            os.umask(previous)
        assert outcome.status == "succeeded"
        for folder in (host.install_root / "versions", host.install_root / "versions/1.5.0"):
            assert folder.stat().st_mode & 0o777 == 0o755, folder
        assert os.umask(previous) == previous  # the caller's umask is given back
