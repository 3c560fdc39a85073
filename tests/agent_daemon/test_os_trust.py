"""The OS trust store on Linux, read once per context (`agent_daemon.os_trust`; issue 16,
footprint): not before the first handshake, never again after it, and from the distributions'
bundle when OpenSSL's own locations hold nothing. Real handshakes with a TLS server on loopback;
the "OS store" is a bundle file named by SSL_CERT_FILE, as OpenSSL reads it."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import pytest

from agent_daemon.os_trust import OsTrustContext, load_os_roots, os_trust_context
from tests.agent_daemon.network_support.pki import Pki, make_pki
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
    load_os_roots(context, defaults=NOTHING_FOUND, bundles=(missing, str(pki.ca)))
    assert context.cert_store_stats()["x509_ca"] == 1
    assert handshake(context, pki) is not None


def test_a_host_without_any_roots_trusts_nothing(tmp_path: Path) -> None:
    context = OsTrustContext(ssl.PROTOCOL_TLS_CLIENT)
    load_os_roots(context, defaults=NOTHING_FOUND, bundles=(str(tmp_path / "missing.pem"),))
    assert context.cert_store_stats()["x509_ca"] == 0
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, make_pki(tmp_path / "pki"))
