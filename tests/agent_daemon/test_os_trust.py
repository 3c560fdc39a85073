"""The OS trust store on Linux, read once per context (`agent_daemon.os_trust`; issue 16,
footprint): not before the first handshake, never again after it, and from the distributions'
bundle when OpenSSL's own locations hold nothing; where a hashed directory sits beside the bundle,
the directory first and the bundle only when a chain needs it — trusting exactly what OpenSSL's
default trusts. Real handshakes with a TLS server on loopback; the "OS store" is a bundle file
named by SSL_CERT_FILE and a directory named by SSL_CERT_DIR, as OpenSSL reads them."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_daemon.http_client import build_http_client
from agent_daemon.network_settings import NetworkSettings
from agent_daemon.os_trust import (
    OsTrustContext,
    RootsWidened,
    load_os_directory_first,
    os_trust_context,
)
from ground.contract import CONFIG_PATH
from tests.agent_daemon.network_support.pki import Pki, hashed_directory, make_pki
from tests.agent_daemon.network_support.servers import control_plane

NOTHING_FOUND = ssl.DefaultVerifyPaths("", "", "SSL_CERT_FILE", "", "SSL_CERT_DIR", "")


@pytest.fixture
def os_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An OS store of this test's own: SSL_CERT_FILE names it, SSL_CERT_DIR is empty."""
    bundle = tmp_path / "os-bundle.pem"
    bundle.write_text("")
    (tmp_path / "no-hashed-certs").mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-hashed-certs"))
    return bundle


def handshake(context: ssl.SSLContext, pki: Pki) -> str | None:
    """The TLS version agreed with a server holding `pki`'s certificate."""
    with (
        control_plane(pki) as plane,
        socket.create_connection(("127.0.0.1", plane.port)) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        return tls.version()


def test_the_agent_uses_the_read_once_context_on_linux() -> None:
    assert isinstance(os_trust_context(), OsTrustContext)


def test_the_os_store_is_trusted(tmp_path: Path, os_bundle: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    os_bundle.write_bytes(pki.ca.read_bytes())
    assert handshake(os_trust_context(), pki) is not None


def test_a_context_that_never_connects_holds_no_roots(tmp_path: Path, os_bundle: Path) -> None:
    # The update client of an idle daemon: it must not hold a copy of the store.
    os_bundle.write_bytes(make_pki(tmp_path / "pki").ca.read_bytes())
    context = os_trust_context()
    assert context.cert_store_stats()["x509_ca"] == 0


def test_the_os_store_is_read_once_not_at_every_handshake(tmp_path: Path, os_bundle: Path) -> None:
    first, later = make_pki(tmp_path / "first"), make_pki(tmp_path / "later")
    os_bundle.write_bytes(first.ca.read_bytes())
    context = os_trust_context()
    assert handshake(context, first) is not None
    # A CA added to the store while the daemon runs is trusted after a restart, not before:
    # re-reading the bundle at every connection is what cost CPU and memory each minute.
    os_bundle.write_bytes(first.ca.read_bytes() + later.ca.read_bytes())
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, later)
    assert handshake(context, first) is not None
    assert context.cert_store_stats()["x509_ca"] == 1
    assert handshake(os_trust_context(), later) is not None


def test_openssl_finding_nothing_falls_back_to_the_distributions_bundle(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    context = OsTrustContext(ssl.PROTOCOL_TLS_CLIENT)
    missing = str(tmp_path / "missing.pem")
    deferred = load_os_directory_first(
        context, defaults=NOTHING_FOUND, bundles=(missing, str(pki.ca))
    )
    assert deferred is None
    assert context.cert_store_stats()["x509_ca"] == 1
    assert handshake(context, pki) is not None


def test_a_host_without_any_roots_trusts_nothing(tmp_path: Path) -> None:
    context = OsTrustContext(ssl.PROTOCOL_TLS_CLIENT)
    deferred = load_os_directory_first(
        context, defaults=NOTHING_FOUND, bundles=(str(tmp_path / "missing.pem"),)
    )
    assert deferred is None
    assert context.cert_store_stats()["x509_ca"] == 0
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, make_pki(tmp_path / "pki"))


# -- a hashed directory beside the bundle (Debian's /etc/ssl/certs) --------------------------------


@dataclass(frozen=True)
class OsStore:
    bundle: Path
    directory: Path


@pytest.fixture
def os_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> OsStore:
    """An OS store of this test's own with both parts: SSL_CERT_FILE and SSL_CERT_DIR."""
    store = OsStore(bundle=tmp_path / "os-bundle.pem", directory=tmp_path / "os-certs")
    store.bundle.write_text("")
    store.directory.mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(store.bundle))
    monkeypatch.setenv("SSL_CERT_DIR", str(store.directory))
    return store


@pytest.fixture
def ca_apart(tmp_path: Path, os_store: OsStore) -> tuple[Pki, Pki]:
    """The control plane's CA, and another one; the store holds the first only in its bundle,
    the second only in its directory (each test rewrites what it needs otherwise)."""
    pki, other = make_pki(tmp_path / "pki"), make_pki(tmp_path / "other", ca_name="other CA")
    os_store.bundle.write_bytes(pki.ca.read_bytes())
    hashed_directory(os_store.directory, other.ca)
    return pki, other


def agent_client(url: str) -> httpx.Client:
    return build_http_client(
        base_url=url,
        credential="nwa_the_agents_credential",
        timeout_seconds=10,
        network=NetworkSettings(),
        environ={},
    )


def test_a_root_in_the_hashed_directory_is_the_only_root_read(
    tmp_path: Path, os_store: OsStore
) -> None:
    # The daemon's footprint: one control plane's chain needs one root, not the whole bundle.
    pki = make_pki(tmp_path / "pki")
    others = [make_pki(tmp_path / f"o{n}", ca_name=f"other CA {n}").ca for n in range(3)]
    os_store.bundle.write_bytes(b"".join(ca.read_bytes() for ca in [pki.ca, *others]))
    hashed_directory(os_store.directory, pki.ca, *others)
    context = os_trust_context()
    assert handshake(context, pki) is not None
    assert handshake(context, pki) is not None
    assert context.cert_store_stats()["x509_ca"] == 1


def test_a_root_only_in_the_bundle_is_trusted_on_the_same_request(
    ca_apart: tuple[Pki, Pki],
) -> None:
    pki, _ = ca_apart
    with control_plane(pki) as plane, agent_client(plane.url) as http:
        statuses = [http.get(CONFIG_PATH).status_code, http.get(CONFIG_PATH).status_code]
    assert statuses == [200, 200]
    # The directory's attempt was refused, the same request made again with the bundle.
    assert len(plane.refused_handshakes) == 1
    assert [request["path"] for request in plane.requests] == [CONFIG_PATH, CONFIG_PATH]


def test_a_socket_is_told_the_roots_widened_and_trusts_them_next(ca_apart: tuple[Pki, Pki]) -> None:
    pki, _ = ca_apart
    context = os_trust_context()
    with pytest.raises(RootsWidened) as widened:
        handshake(context, pki)
    assert widened.value.verify_code == 20  # unable to get local issuer certificate
    assert handshake(context, pki) is not None


def test_a_root_in_neither_is_refused_after_one_attempt_with_the_bundle(
    os_store: OsStore, ca_apart: tuple[Pki, Pki]
) -> None:
    pki, other = ca_apart
    os_store.bundle.write_bytes(other.ca.read_bytes())
    with control_plane(pki) as plane, agent_client(plane.url) as http:
        with pytest.raises(httpx.ConnectError) as caught:
            http.get(CONFIG_PATH)
        assert "certificate is not trusted" in str(caught.value)
        assert "--ca-file" in str(caught.value)
        with pytest.raises(httpx.ConnectError):
            http.get(CONFIG_PATH)
    # The directory's attempt and the bundle's, then one per request: no loop of attempts.
    assert len(plane.refused_handshakes) == 3
    assert plane.requests == []


def test_a_handshake_made_later_trusts_the_bundle_from_the_start(ca_apart: tuple[Pki, Pki]) -> None:
    # Its failure would not pass through the context: nothing could widen the roots then.
    pki, _ = ca_apart
    context = os_trust_context()
    with (
        control_plane(pki) as plane,
        socket.create_connection(("127.0.0.1", plane.port)) as raw,
        context.wrap_socket(raw, server_hostname="localhost", do_handshake_on_connect=False) as tls,
    ):
        tls.do_handshake()
        assert tls.version() is not None
    memory = os_trust_context()
    memory.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="localhost")
    assert memory.cert_store_stats()["x509_ca"] == 1


def test_a_handshake_begun_before_another_widened_the_roots_is_told_so(
    ca_apart: tuple[Pki, Pki], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two connections of one context at once: the other's failure adds the bundle while this
    # handshake, made without it, is under way. Its failure must also send its request again.
    # One seam stands in: the handshake that fails after the other one widened the roots.
    pki, _ = ca_apart
    context = os_trust_context()
    real = ssl.SSLContext.wrap_socket

    stood_in: list[OsTrustContext] = []

    def failed_after_another_widened(
        self: ssl.SSLContext, sock: socket.socket, *args: Any, **kwargs: Any
    ) -> ssl.SSLSocket:
        # Only the agent's first handshake: the test server's own contexts are ssl's.
        if not isinstance(self, OsTrustContext) or stood_in:
            return real(self, sock, *args, **kwargs)
        stood_in.append(self)
        self._add_deferred_bundle()
        failed = ssl.SSLCertVerificationError(1, "certificate verify failed")
        failed.verify_code, failed.verify_message = 20, "unable to get local issuer certificate"
        raise failed

    monkeypatch.setattr(ssl.SSLContext, "wrap_socket", failed_after_another_widened)
    with pytest.raises(RootsWidened):
        handshake(context, pki)
    assert stood_in == [context]
    assert handshake(context, pki) is not None
