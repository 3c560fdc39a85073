"""Whom the agent trusts over TLS, and what it says when trust fails.

- The host's trust store (OpenSSL's default verify paths, `ssl.create_default_context`), with
  `ca_file` *added* to it — a private CA never replaces the public ones, unlike `SSL_CERT_FILE`.
  Verification is never widened or retried: a chain these roots do not verify is refused.
- `pinned_public_key_sha256`: after the handshake with the control plane's host, and before a
  byte of the request (the credential) is sent, the sha256 of the certificate's
  SubjectPublicKeyInfo must equal the pin. Checked on the control plane's host only: a proxy's or
  an artifact mirror's certificate is not the control plane's.
- `client_cert` / `client_key`: presented when a server asks for one (mTLS egress).

The three files are read within `MAX_PEM_FILE_BYTES` (`ground.planted_files`: a regular file,
never waited on): a file past it is refused by name, never read to its end. `ca_file` is loaded
from the bytes that were read (`cadata`); OpenSSL takes a certificate and its key by name only,
so those two are loaded by name just after their bound was checked (the settings hold them to the
owner and mode of a root-kept file).

Failures become one sentence naming the fix (`explain_failure`), e.g. "the control plane's
certificate is not trusted (…): pass --ca-file or fix the host's trust store".
"""

from __future__ import annotations

import base64
import hashlib
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_daemon.connection.network_settings import (
    MAX_PEM_FILE_BYTES,
    NetworkSettings,
    parse_pin,
    pem_file_too_large,
)
from agent_daemon.errors import ConfigError
from ground.instants import format_instant
from ground.planted_files import NotRegularFile, read_regular

__all__ = [
    "PublicKeyPinMismatch",
    "build_ssl_context",
    "causes",
    "check_pin",
    "explain_failure",
    "spki_sha256",
]

# What a server's alert says when it did not accept the client's certificate (or got none).
_CLIENT_CERT_ALERTS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED",
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE",
    "SSLV3_ALERT_CERTIFICATE_REVOKED",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED",
    "TLSV1_ALERT_UNKNOWN_CA",
    "TLSV1_ALERT_ACCESS_DENIED",
}

# What OpenSSL says when the other side answered the handshake with something that is not TLS:
# a plain http server's "HTTP/1.1 400 Bad Request" read as a TLS record.
_NOT_TLS = {"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"}

# OpenSSL's X509_V_ERR_HOSTNAME_MISMATCH, _EMAIL_MISMATCH and _IP_ADDRESS_MISMATCH.
_NAME_MISMATCH = {62, 63, 64}
# OpenSSL's X509_V_ERR_CERT_NOT_YET_VALID and _CERT_HAS_EXPIRED.
_NOT_YET_VALID = 9
_DATES = {_NOT_YET_VALID, 10}


class PublicKeyPinMismatch(Exception):
    """The control plane's public key is not the pinned one (raised before the request is sent)."""

    def __init__(self, host: str, found: bytes) -> None:
        self.host = host
        self.found = found
        super().__init__(
            f"the control plane's public key does not match pinned_public_key_sha256 "
            f"({host} presented sha256 {base64.b64encode(found).decode()}); if its key was "
            "replaced on purpose, update pinned_public_key_sha256"
        )


def _load_error(field: str, path: Path, exc: Exception) -> ConfigError:
    if isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError):
        return ConfigError(f"{field}: {str(path)!r} cannot be read ({exc.strerror})")
    reason = getattr(exc, "reason", None) or str(exc)
    return ConfigError(f"{field}: {str(path)!r} cannot be used ({reason})")


def _bounded(field: str, path: Path) -> bytes:
    """The file's bytes, read within `MAX_PEM_FILE_BYTES`; a refusal naming `field` otherwise."""
    try:
        data = read_regular(path, MAX_PEM_FILE_BYTES, follow_links=True)
    except NotRegularFile as exc:
        raise ConfigError(f"{field}: {str(path)!r}: {exc.strerror} — expected a PEM file") from exc
    except OSError as exc:
        raise _load_error(field, path, exc) from exc
    if len(data) > MAX_PEM_FILE_BYTES:
        raise pem_file_too_large(field, path)
    return data


def build_ssl_context(network: NetworkSettings) -> ssl.SSLContext:
    """The host's trust store, plus `ca_file`, plus the client certificate; TLS 1.2 at least."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if network.ca_file is not None:
        pem = _bounded("ca_file", network.ca_file)
        try:
            # PEM is ASCII: text outside its blocks may not be (a comment), and is not read.
            context.load_verify_locations(cadata=pem.decode("ascii", errors="ignore"))
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"ca_file: {str(network.ca_file)!r} cannot be used (it holds no certificate "
                "OpenSSL can load: expected PEM blocks '-----BEGIN CERTIFICATE-----')"
            ) from exc
    if network.client_cert is not None:
        _bounded("client_cert", network.client_cert)
        if network.client_key is not None:
            _bounded("client_key", network.client_key)
        try:
            context.load_cert_chain(network.client_cert, network.client_key)
        except (OSError, ValueError) as exc:
            if getattr(exc, "reason", None) == "KEY_VALUES_MISMATCH":
                raise ConfigError(
                    f"client_key: {str(network.client_key)!r} is not the key of client_cert "
                    f"{str(network.client_cert)!r}"
                ) from exc
            field = "client_cert" if network.client_key is None else "client_cert/client_key"
            raise _load_error(field, network.client_cert, exc) from exc
    return context


def spki_sha256(certificate_der: bytes) -> bytes:
    """The sha256 of a certificate's SubjectPublicKeyInfo (what a public-key pin names)."""
    # Imported here: only an agent with a pin reads certificates, and `cryptography` is large.
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    certificate = x509.load_der_x509_certificate(certificate_der)
    spki = certificate.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(spki).digest()


def check_pin(ssl_object: Any, *, pin: str, host: str) -> None:
    """Raise `PublicKeyPinMismatch` unless the peer's public key is the pinned one.

    `ssl_object` is what the connection's `get_extra_info("ssl_object")` gives: an `SSLObject`,
    an `SSLSocket`, or the C object behind one — `getpeercert(True)` positionally suits all."""
    der = ssl_object.getpeercert(True)
    found = spki_sha256(der) if der else b""
    if found != parse_pin(pin):
        raise PublicKeyPinMismatch(host, found)


def causes(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and what caused it, outermost first (each once)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _outside_its_dates(whose: str, detail: str, code: int) -> str:
    """A certificate refused for its dates, judged by this host's clock (what OpenSSL read): a
    host whose clock is wrong sees every certificate so, and no CA file helps."""
    now = format_instant(datetime.now(UTC).replace(microsecond=0))
    fix_the_clock = (
        "set the host's clock right (timedatectl set-ntp true, or chrony; NTP's UDP port 123 open)"
    )
    if code == _NOT_YET_VALID:
        return (
            f"{whose} is not valid yet by this host's clock ({now}; {detail}): the host's clock "
            f"is probably behind: {fix_the_clock}"
        )
    return (
        f"{whose} has expired by this host's clock ({now}; {detail}): if the clock is right, "
        f"the certificate must be renewed where it is served; if the clock is ahead, "
        f"{fix_the_clock}"
    )


def explain_failure(
    exc: BaseException,
    *,
    tls_host: str | None,
    control_host: str,
    network: NetworkSettings,
    tls_port: int | None = None,
    proxy_host: str | None = None,
) -> str | None:
    """One sentence naming the fix for a TLS failure, or None when `exc` is not one. `tls_port`
    is the port the handshake went to; `proxy_host` the https:// proxy's host, if any."""
    whose = (
        "the control plane's certificate"
        if tls_host in {None, control_host}
        else f"the certificate of {tls_host}"
    )
    for cause in causes(exc):
        if isinstance(cause, PublicKeyPinMismatch):
            return str(cause)
        if isinstance(cause, ssl.SSLError) and cause.reason in _NOT_TLS:
            host = tls_host or control_host
            where = host if tls_port is None else f"{host}:{tls_port}"
            if proxy_host is not None and host == proxy_host:
                return (
                    f"the proxy at {where} does not speak TLS on that port; is the proxy URL "
                    f"http://{where}?"
                )
            return f"the server at {where} does not speak TLS on that port; is the URL http://{where}…?"
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = cause.verify_message or cause.reason or "verification failed"
            if cause.verify_code in _DATES:
                return _outside_its_dates(whose, detail, cause.verify_code)
            if cause.verify_code in _NAME_MISMATCH:
                return (
                    f"{whose} is not valid for {tls_host or control_host} ({detail}): the URL "
                    "must name a host the certificate was issued for"
                )
            return (
                f"{whose} is not trusted ({detail}): pass --ca-file (ca_file in agent.toml) "
                "or fix the host's trust store"
            )
        if isinstance(cause, ssl.SSLError) and cause.reason in _CLIENT_CERT_ALERTS:
            if network.client_cert is None:
                return (
                    f"{tls_host or control_host} asks for a client certificate "
                    f"({cause.reason}): pass --client-cert and --client-key "
                    "(client_cert, client_key in agent.toml)"
                )
            return (
                f"the client certificate was refused by {tls_host or control_host} "
                f"({cause.reason}): client_cert {str(network.client_cert)!r} must be issued by "
                "a CA that server trusts, and still valid"
            )
    return None
