"""Where the artifact may come from and who gets the credential, and one
deadline over the whole download exchange — against real loopback servers."""

from __future__ import annotations

import hashlib
import os
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.errors import ConfigError, DownloadStalled, UntrustedArtifactSource
from agent_daemon.updater.download.artifact_source import Origin, parse_origin, resolve_source
from agent_daemon.updater.download.fetch import ArtifactSpec, DownloadLimits, download_artifact
from agent_daemon.updater.updater import Updater
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.clock import SystemClock
from tests.agent_daemon.network_support.pki import make_pki
from tests.agent_daemon.scripted_server import head_drips, head_never_ends, scripted_server
from tests.agent_daemon.updater_support.host import Host, host_running
from tests.worlds.artifact_server import ArtifactServer, artifact_server

CREDENTIAL = "Bearer nwa_the_agents_credential"


def origin_of(url: str) -> str:
    parsed = httpx.URL(url)
    return f"{parsed.scheme}://{parsed.host}:{parsed.port}"


def control_client(base_url: str) -> httpx.Client:
    """The daemon's client as `agent_daemon.connection.http_client` builds it: base URL and
    credential."""
    return httpx.Client(base_url=base_url, headers={"Authorization": CREDENTIAL})


def assert_untouched(host: Host, version: str | None) -> None:
    assert version == "1.4.1"
    assert host.current() == "versions/1.4.1"
    assert host.state()["in_progress"] is None


# -- item 2: the artifact's origin and the credential ----------------------------------------------


def test_the_credential_goes_to_the_control_planes_own_origin(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        client = control_client(origin_of(request.artifact_url))
        outcome = Updater(settings=host.settings, client=client, clock=SystemClock()).apply(request)
        assert (outcome.status, outcome.version) == ("succeeded", "1.5.0")
        (fetched,) = host.server.requests("/v1/agent/runs/run-1/artifact")
        assert fetched["authorization"] == CREDENTIAL


def test_an_artifact_url_on_another_origin_is_refused_and_never_fetched(tmp_path: Path) -> None:
    with host_running(tmp_path) as host, artifact_server() as control_plane:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        client = control_client(origin_of(control_plane.serve("/", b"")))
        outcome = Updater(settings=host.settings, client=client, clock=SystemClock()).apply(request)
        assert outcome.status == "failed"
        assert "neither the control plane's origin" in (outcome.error or "")
        assert "nor listed in artifact_origins (none)" in (outcome.error or "")
        assert host.server.requests("/v1/agent/runs/run-1/artifact") == []
        assert_untouched(host, outcome.version)


@pytest.mark.parametrize(
    "trick",
    [
        pytest.param(lambda url: url.replace("http://", "https://"), id="other_scheme"),
        pytest.param(lambda url: url.replace("127.0.0.1", "localhost"), id="other_host_name"),
        pytest.param(lambda url: url.replace("http://127.0.0.1", "http://127.0.0.2"),
                     id="other_loopback_address"),
    ],
)  # fmt: skip
def test_a_look_alike_origin_is_another_origin(tmp_path: Path, trick: object) -> None:
    with host_running(tmp_path) as host:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        client = control_client(origin_of(request.artifact_url))
        looks_alike = trick(request.artifact_url)  # type: ignore[operator]
        tricked = Updater(settings=host.settings, client=client, clock=SystemClock()).apply(
            type(request)(
                run_id="run-1",
                manifest=request.manifest,
                signature=request.signature,
                artifact_url=looks_alike,
            )
        )
        assert tricked.status == "failed"
        assert "neither the control plane's origin" in (tricked.error or "")
        assert host.server.requests("/v1/agent/runs/run-1/artifact") == []


def test_an_operator_listed_origin_is_fetched_without_the_credential(tmp_path: Path) -> None:
    with host_running(tmp_path) as host, artifact_server() as control_plane:
        request = host.request(host.factory.release("1.5.0", 42), "run-1")
        client = control_client(origin_of(control_plane.serve("/", b"")))
        settings = replace(host.settings, artifact_origins=(origin_of(request.artifact_url),))
        outcome = Updater(settings=settings, client=client, clock=SystemClock()).apply(request)
        assert (outcome.status, outcome.version) == ("succeeded", "1.5.0")
        (fetched,) = host.server.requests("/v1/agent/runs/run-1/artifact")
        assert "authorization" not in fetched


@pytest.mark.parametrize(
    ("control", "send"),
    [
        pytest.param("https://control.example", True, id="https"),
        pytest.param("http://127.0.0.1:8080", True, id="http_loopback"),
        pytest.param("http://[::1]:8080", True, id="http_loopback_ipv6"),
        pytest.param("http://control.example", False, id="http_to_a_network_host"),
    ],
)
def test_the_credential_never_goes_over_http_to_a_non_loopback_host(
    control: str, send: bool
) -> None:
    origin = parse_origin(control)
    source = resolve_source(f"{control}/v1/agent/runs/r/artifact", control=origin, allowed=())
    assert source.send_credential is send


def test_a_client_without_a_control_plane_never_sends_a_credential() -> None:
    source = resolve_source("https://anywhere.example/a", control=None, allowed=())
    assert source.send_credential is False
    assert source.origin == Origin(scheme="https", host="anywhere.example", port=443)


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("https://mirror.example/builds", id="with_a_path"),
        pytest.param("ftp://mirror.example", id="ftp"),
        pytest.param("https://user@mirror.example", id="userinfo"),
        pytest.param("mirror.example", id="no_scheme"),
    ],
)
def test_an_artifact_origin_setting_that_is_not_an_origin_is_refused(
    tmp_path: Path, origin: str
) -> None:
    with pytest.raises(ConfigError, match="artifact_origins"):
        UpdaterSettings(
            install_root=tmp_path,
            state_dir=tmp_path,
            trusted_keys={"k": Ed25519PrivateKey.generate().public_key()},
            platform="linux-x86_64",
            channel="stable",
            health_command=("true",),
            artifact_origins=(origin,),
        )


def test_an_untrusted_source_names_the_origin_and_what_is_allowed() -> None:
    with pytest.raises(UntrustedArtifactSource) as refused:
        resolve_source(
            "https://evil.example/a",
            control=parse_origin("https://control.example"),
            allowed=(parse_origin("https://mirror.example:8443"),),
        )
    assert str(refused.value) == (
        "artifact_url: 'https://evil.example/a' is on https://evil.example:443, which is neither "
        "the control plane's origin (https://control.example:443) nor listed in artifact_origins "
        "(https://mirror.example:8443)"
    )


# -- item 3: one deadline over connect, head and body ----------------------------------------------

ARTIFACT = os.urandom(10_000)
SPEC_SHA = hashlib.sha256(ARTIFACT).hexdigest()


@pytest.fixture
def server() -> Iterator[ArtifactServer]:
    with artifact_server() as running:
        yield running


def test_a_server_that_never_finishes_its_head_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    # Each byte of the head comes well within the read timeout: only the deadline can end it.
    limits = DownloadLimits(read_timeout=5.0, deadline=1.0, disk_reserve_bytes=0)
    with scripted_server(head_never_ends(interval=0.05)) as hostile, httpx.Client() as client:
        spec = ArtifactSpec(
            url=hostile.url(), sha256=SPEC_SHA, length=len(ARTIFACT), unpacked_size=1
        )
        # The head never ends, so without the deadline this would not return at all: the error
        # naming the deadline is the proof (a bound on the elapsed time only measures the machine).
        with pytest.raises(DownloadStalled, match=r"ran past its deadline of 1 s"):
            download_artifact(
                client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=limits
            )


def test_a_head_that_never_ends_over_tls_is_cut_off_at_the_deadline(tmp_path: Path) -> None:
    """Over https the connection's socket is wrapped for TLS after it connects, which takes the
    socket the watchdog saw over: shutting that one down did nothing, and the download over https
    — every real one — was held as long as the server dripped."""
    pki = make_pki(tmp_path / "pki")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    limits = DownloadLimits(read_timeout=5.0, deadline=1.0, disk_reserve_bytes=0)
    with (
        scripted_server(head_drips(lasting=20.0), tls=context) as hostile,
        httpx.Client(verify=ssl.create_default_context(cafile=pki.ca)) as client,
    ):
        spec = ArtifactSpec(
            url=hostile.url().replace("127.0.0.1", "localhost"),
            sha256=SPEC_SHA,
            length=len(ARTIFACT),
            unpacked_size=1,
        )
        started = time.monotonic()
        with pytest.raises(DownloadStalled, match=r"ran past its deadline of 1 s"):
            download_artifact(
                client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=limits
            )
        # The drip ends by itself after 20 s (then the error names the deadline too): only the
        # time taken tells a deadline that held from one that did not.
        assert time.monotonic() - started < 10.0


def test_the_deadline_watchdog_does_not_cut_a_download_that_finishes_in_time(
    server: ArtifactServer, tmp_path: Path
) -> None:
    limits = DownloadLimits(read_timeout=5.0, deadline=2.0, disk_reserve_bytes=0)
    url = server.serve("/artifact", ARTIFACT)
    spec = ArtifactSpec(url=url, sha256=SPEC_SHA, length=len(ARTIFACT), unpacked_size=1)
    before = set(threading.enumerate())
    with httpx.Client() as client:
        path = download_artifact(
            client, spec, staging=tmp_path / "staging", install_root=tmp_path, limits=limits
        )
    assert path.read_bytes() == ARTIFACT
    # The deadline's timer was cancelled when the download ended, long before its 2 s: a timer
    # still waiting would shut the sockets of whatever exchange came next.
    timers = [t for t in threading.enumerate() if isinstance(t, threading.Timer)]
    started = [t for t in timers if t not in before]
    assert all(timer.finished.is_set() for timer in started)


def test_an_update_whose_server_never_finishes_its_head_fails_and_the_next_installs(
    tmp_path: Path,
) -> None:
    with host_running(tmp_path) as host, scripted_server(head_never_ends()) as hostile:
        release = host.factory.release("1.5.0", 42)
        request = host.request(release, "run-1")
        stalled = type(request)(
            run_id="run-1",
            manifest=request.manifest,
            signature=request.signature,
            artifact_url=hostile.url(),
        )
        # Without the deadline the never-ending head would never return: the outcome naming it
        # is the proof, not the elapsed time.
        outcome = host.updater(download_deadline_seconds=1.0).apply(stalled)
        assert outcome.status == "failed"
        assert "ran past its deadline" in (outcome.error or "")
        assert_untouched(host, outcome.version)
        assert host.apply(release, "run-2").status == "succeeded"
