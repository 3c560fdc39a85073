"""Trust: the host's trust store plus `ca_file`, the public-key pin and the client
certificate — against a real TLS server on loopback with a private CA made for each test."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.tls_trust import build_ssl_context, spki_sha256
from agent_daemon.errors import ConfigError
from ground.contract import CONFIG_PATH
from tests.agent_daemon.network_support.pki import Pki, hashed_directory, make_pki
from tests.agent_daemon.network_support.servers import control_plane

CREDENTIAL = "nwa_the_agents_credential"


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def client(url: str, **network: object) -> httpx.Client:
    return build_http_client(
        base_url=url,
        credential=CREDENTIAL,
        timeout_seconds=10,
        network=NetworkSettings.model_validate(network),
        environ={},
    )


def fetch(url: str, **network: object) -> httpx.Response:
    with client(url, **network) as http:
        return http.get(CONFIG_PATH)


def refusal(url: str, **network: object) -> str:
    with pytest.raises(httpx.TransportError) as caught:
        fetch(url, **network)
    return str(caught.value)


# -- the trust store and ca_file ------------------------------------------------------------------


def test_a_private_ca_is_not_trusted_without_ca_file(pki: Pki) -> None:
    with control_plane(pki) as plane:
        message = refusal(plane.url)
        assert plane.requests == []
    # One handshake, refused: a chain that does not verify is never tried again with more roots.
    assert len(plane.refused_handshakes) == 1
    assert message.startswith("the control plane's certificate is not trusted (")
    fix = ": pass --ca-file (ca_file in agent.toml) or fix the host's trust store"
    assert message.endswith(fix)


def test_ca_file_makes_the_private_ca_trusted(pki: Pki) -> None:
    with control_plane(pki) as plane:
        answer = fetch(plane.url, ca_file=pki.ca)
        assert answer.status_code == 200
        (request,) = plane.requests
        assert request["headers"]["Authorization"] == f"Bearer {CREDENTIAL}"


def test_ca_file_is_added_to_the_os_trust_store_not_in_its_place(
    pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSL_CERT_FILE replaced the whole bundle; ca_file must keep every public CA trusted —
    whether the OS store is read from its bundle or, root by root, from its hashed directory."""
    public = make_pki(tmp_path / "public", ca_name="a public CA")
    bundle, directory = tmp_path / "os-bundle.pem", tmp_path / "os-certs"
    bundle.write_bytes(public.ca.read_bytes())
    hashed_directory(directory, public.ca)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    for os_directory in (directory, tmp_path / "no-directory"):
        monkeypatch.setenv("SSL_CERT_DIR", str(os_directory))
        context = build_ssl_context(NetworkSettings(ca_file=pki.ca))
        for server in (public, pki):
            with (
                control_plane(server) as plane,
                socket.create_connection(("127.0.0.1", plane.port)) as raw,
                context.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                assert tls.version() is not None


def test_a_certificate_for_another_name_is_refused_naming_the_host(pki: Pki) -> None:
    with control_plane(pki) as plane:
        message = refusal(plane.url_for("127.0.0.1"), ca_file=pki.ca)
        assert plane.requests == []
    assert message.startswith("the control plane's certificate is not valid for 127.0.0.1 (")


# -- the public-key pin ---------------------------------------------------------------------------


def test_the_right_pin_is_accepted_in_base64_and_in_hex(pki: Pki) -> None:
    with control_plane(pki) as plane:
        assert fetch(plane.url, ca_file=pki.ca, pinned_public_key_sha256=pki.server_pin).is_success
        assert fetch(
            plane.url, ca_file=pki.ca, pinned_public_key_sha256=pki.server_pin_hex
        ).is_success
        assert len(plane.requests) == 2


def test_a_wrong_pin_is_refused_before_the_credential_is_sent(pki: Pki) -> None:
    wrong = base64.b64encode(hashlib.sha256(b"another key").digest()).decode()
    with control_plane(pki) as plane:
        message = refusal(plane.url, ca_file=pki.ca, pinned_public_key_sha256=wrong)
        assert plane.requests == []  # the TLS handshake happened, the request never did
    assert message.startswith(
        "the control plane's public key does not match pinned_public_key_sha256"
    )
    assert f"presented sha256 {pki.server_pin}" in message


def test_the_pin_does_not_replace_verification(pki: Pki) -> None:
    """A pin alone does not make an untrusted certificate acceptable: both must hold."""
    with control_plane(pki) as plane:
        message = refusal(plane.url, pinned_public_key_sha256=pki.server_pin)
    assert "is not trusted" in message


def test_spki_digest_is_the_digest_of_the_servers_public_key(pki: Pki) -> None:
    der = x509.load_pem_x509_certificate(pki.server_cert.read_bytes()).public_bytes(Encoding.DER)
    assert base64.b64encode(spki_sha256(der)).decode() == pki.server_pin


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("abc", id="too_short"),
        pytest.param("z" * 64, id="not_hex"),
        pytest.param(base64.b64encode(b"x" * 20).decode(), id="sha1_sized"),
    ],
)
def test_a_malformed_pin_is_refused_naming_the_field(value: str) -> None:
    with pytest.raises(ValueError, match="pinned_public_key_sha256"):
        NetworkSettings(pinned_public_key_sha256=value)


# -- the client certificate -----------------------------------------------------------------------


def test_a_client_certificate_is_presented_when_the_control_plane_requires_one(pki: Pki) -> None:
    with control_plane(pki, require_client_cert=True) as plane:
        answer = fetch(
            plane.url, ca_file=pki.ca, client_cert=pki.client_cert, client_key=pki.client_key
        )
        assert answer.status_code == 200
    # Read once the server's threads are joined: each records its handshake in its own thread.
    assert plane.refused_handshakes == []


def test_without_a_client_certificate_the_refusal_names_the_flags(pki: Pki) -> None:
    with control_plane(pki, require_client_cert=True) as plane:
        message = refusal(plane.url, ca_file=pki.ca)
    assert plane.requests == []
    assert len(plane.refused_handshakes) == 1
    assert "asks for a client certificate" in message
    assert "pass --client-cert and --client-key" in message


def test_a_client_certificate_from_another_ca_is_refused(pki: Pki) -> None:
    with control_plane(pki, require_client_cert=True) as plane:
        message = refusal(
            plane.url, ca_file=pki.ca, client_cert=pki.stranger_cert, client_key=pki.stranger_key
        )
    assert plane.requests == []
    assert message.startswith("the client certificate was refused by localhost")


# -- files that cannot be used --------------------------------------------------------------------


def test_a_missing_ca_file_names_the_field_and_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError, match=f"ca_file: '{missing}' cannot be read"):
        build_ssl_context(NetworkSettings(ca_file=missing))


def test_a_ca_file_that_is_not_pem_names_the_field(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=f"ca_file: '{junk}' cannot be used"):
        build_ssl_context(NetworkSettings(ca_file=junk))


def test_a_client_key_that_does_not_belong_to_the_certificate_is_named(pki: Pki) -> None:
    with pytest.raises(ConfigError, match=r"client_key: .* is not the key of client_cert"):
        build_ssl_context(NetworkSettings(client_cert=pki.client_cert, client_key=pki.stranger_key))


def test_a_client_key_without_its_certificate_is_refused(pki: Pki) -> None:
    with pytest.raises(ValueError, match="client_key is set without client_cert"):
        NetworkSettings(client_key=pki.client_key)


def test_relative_paths_are_refused(pki: Pki) -> None:
    with pytest.raises(ValueError, match="expected an absolute path"):
        NetworkSettings(ca_file=Path(os.path.relpath(pki.ca)))


# -- certificates outside their dates: the host's clock -------------------------------------------


def test_a_certificate_not_valid_yet_points_at_the_hosts_clock(tmp_path: Path) -> None:
    """A host whose clock is behind (a restored snapshot, a dead battery) sees the control plane's
    certificate as not valid yet: the fix is its clock, not a CA file."""
    pki = make_pki(tmp_path / "pki", server_shift=timedelta(days=3))
    with control_plane(pki) as plane:
        message = refusal(plane.url, ca_file=str(pki.ca))
        assert plane.requests == []
    assert message.startswith(
        "the control plane's certificate is not valid yet by this host's clock"
    )
    assert "certificate is not yet valid" in message  # OpenSSL's own words, kept
    assert message.endswith("set the host's clock right (timedatectl set-ntp true, or chrony;"
                            " NTP's UDP port 123 open)")  # fmt: skip
    assert "--ca-file" not in message


def test_an_expired_certificate_names_both_fixes(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki", server_shift=-timedelta(days=10))
    with control_plane(pki) as plane:
        message = refusal(plane.url, ca_file=str(pki.ca))
    assert message.startswith("the control plane's certificate has expired by this host's clock")
    assert "the certificate must be renewed where it is served" in message
    assert "if the clock is ahead, set the host's clock right" in message
