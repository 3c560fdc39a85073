"""The PEM files `agent.toml` names (`ca_file`, `client_cert`, `client_key`) are read within a
bound: a file that grew past it after enroll — a log file named by mistake, a bundle gone wild,
a 2 GiB file — is refused by one line naming the setting, the file and the limit, never read to
its end by OpenSSL. Real files, a private CA made for each test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_daemon.connection.network_settings import MAX_PEM_FILE_BYTES, NetworkSettings
from agent_daemon.connection.tls_trust import build_ssl_context
from agent_daemon.errors import ConfigError
from tests.agent_daemon.network_support.pki import Pki, make_pki


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


def padded(original: Path, into: Path, size: int) -> Path:
    """`original`'s PEM followed by text lines up to `size` bytes: as usable as the original
    to OpenSSL, only larger."""
    pem = original.read_bytes()
    line = b"# padding outside any PEM block, which OpenSSL skips\n"
    into.write_bytes(pem + line * ((size - len(pem)) // len(line) + 1))
    into.chmod(0o600)
    return into


def network(pki: Pki, **replaced: Path) -> NetworkSettings:
    files = {"ca_file": pki.ca, "client_cert": pki.client_cert, "client_key": pki.client_key}
    return NetworkSettings.model_validate({**files, **replaced})


def test_files_at_the_bound_are_used(pki: Pki, tmp_path: Path) -> None:
    ca = padded(pki.ca, tmp_path / "ca.pem", MAX_PEM_FILE_BYTES - 100)
    cert = padded(pki.client_cert, tmp_path / "cert.pem", MAX_PEM_FILE_BYTES - 100)
    key = padded(pki.client_key, tmp_path / "key.pem", MAX_PEM_FILE_BYTES - 100)
    context = build_ssl_context(network(pki, ca_file=ca, client_cert=cert, client_key=key))
    assert any(c["subject"] for c in context.get_ca_certs())


@pytest.mark.parametrize("field", ["ca_file", "client_cert", "client_key"])
def test_a_file_past_the_bound_is_refused_naming_setting_path_and_limit(
    pki: Pki, tmp_path: Path, field: str
) -> None:
    original = getattr(pki, "ca" if field == "ca_file" else field)
    big = padded(original, tmp_path / f"{field}.pem", MAX_PEM_FILE_BYTES + 1)
    before = big.read_bytes()
    with pytest.raises(ConfigError) as caught:
        build_ssl_context(network(pki, **{field: big}))
    assert str(caught.value) == (
        f"{field}: {str(big)!r} is larger than {MAX_PEM_FILE_BYTES} bytes — expected a PEM file"
    )
    assert big.read_bytes() == before


@pytest.mark.parametrize("field", ["ca_file", "client_cert", "client_key"])
def test_a_sparse_two_gib_file_is_refused_without_reading_it(
    pki: Pki, tmp_path: Path, field: str
) -> None:
    huge = tmp_path / "huge.pem"
    with huge.open("wb") as opened:
        opened.write(getattr(pki, "ca" if field == "ca_file" else field).read_bytes())
        opened.truncate(2 * 1024**3)
    huge.chmod(0o600)
    with pytest.raises(ConfigError, match=f"is larger than {MAX_PEM_FILE_BYTES} bytes"):
        build_ssl_context(network(pki, **{field: huge}))
    assert huge.stat().st_size == 2 * 1024**3


def test_a_client_certificate_holding_its_key_still_loads(pki: Pki, tmp_path: Path) -> None:
    both = tmp_path / "both.pem"
    both.write_bytes(pki.client_cert.read_bytes() + pki.client_key.read_bytes())
    os.chmod(both, 0o600)
    build_ssl_context(NetworkSettings(ca_file=pki.ca, client_cert=both))


def test_a_ca_file_with_a_comment_in_another_script_still_loads(pki: Pki, tmp_path: Path) -> None:
    # Loaded from the bytes read: text outside the PEM blocks (a comment in any script) is passed
    # over as OpenSSL passes it over when it reads the file itself.
    commented = tmp_path / "ca.pem"
    commented.write_bytes("# Zertifizierungsstelle für Büro\n".encode() + pki.ca.read_bytes())
    context = build_ssl_context(network(pki, ca_file=commented))
    assert any(c["subject"] for c in context.get_ca_certs())
