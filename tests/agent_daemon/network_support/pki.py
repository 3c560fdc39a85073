"""A private CA with a server and client certificates, made with `cryptography` for each test."""

from __future__ import annotations

import base64
import datetime
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES = ("localhost", "control.example")


@dataclass(frozen=True, kw_only=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # a client certificate from a CA the server does not trust
    stranger_key: Path
    server_pin: str  # base64 sha256 of the server certificate's SubjectPublicKeyInfo

    @property
    def server_pin_hex(self) -> str:
        return base64.b64decode(self.server_pin).hex()


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)


def _issue(
    *,
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    usage: x509.ObjectIdentifier | None,
    names: tuple[str, ...] = (),
    shift: datetime.timedelta = datetime.timedelta(0),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC) + shift
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer.subject if issuer is not None else _name(subject))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False,
        )
    )
    if usage is None:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=True, path_length=None), critical=True
        ).add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
    else:
        builder = builder.add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        ).add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if names:
        # Names only: https://127.0.0.1 is then a name the certificate was not issued for.
        alt: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(path: Path, certificate: x509.Certificate) -> None:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))


def make_pki(
    folder: Path,
    *,
    ca_name: str = "nachtwacht test CA",
    server_shift: datetime.timedelta = datetime.timedelta(0),
) -> Pki:
    """`server_shift` moves the server certificate's validity (from 5 minutes before to 2 days
    after its issue) by that much: days ahead, it is not valid yet; days back, it has expired."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue(subject=ca_name, key=ca_key, issuer=None, issuer_key=ca_key,
                usage=None)  # fmt: skip
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _issue(subject="control.example", key=server_key, issuer=ca, issuer_key=ca_key,
                    usage=ExtendedKeyUsageOID.SERVER_AUTH, names=SERVER_NAMES,
                    shift=server_shift)  # fmt: skip
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _issue(subject="web-01", key=client_key, issuer=ca, issuer_key=ca_key,
                    usage=ExtendedKeyUsageOID.CLIENT_AUTH)  # fmt: skip
    stranger_ca_key = ec.generate_private_key(ec.SECP256R1())
    stranger_ca = _issue(subject="another CA", key=stranger_ca_key, issuer=None,
                         issuer_key=stranger_ca_key, usage=None)  # fmt: skip
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    stranger = _issue(
        subject="web-01",
        key=stranger_key,
        issuer=stranger_ca,
        issuer_key=stranger_ca_key,
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )
    pki = Pki(
        ca=folder / "ca.pem",
        server_cert=folder / "server.pem",
        server_key=folder / "server.key",
        client_cert=folder / "client.pem",
        client_key=folder / "client.key",
        stranger_cert=folder / "stranger.pem",
        stranger_key=folder / "stranger.key",
        server_pin=base64.b64encode(
            hashlib.sha256(
                server_key.public_key().public_bytes(
                    serialization.Encoding.DER,
                    serialization.PublicFormat.SubjectPublicKeyInfo,
                )
            ).digest()
        ).decode(),
    )
    _pem(pki.ca, ca)
    _pem(pki.server_cert, server)
    _write_key(pki.server_key, server_key)
    _pem(pki.client_cert, client)
    _write_key(pki.client_key, client_key)
    _pem(pki.stranger_cert, stranger)
    _write_key(pki.stranger_key, stranger_key)
    return pki


def _der(tag: int, content: bytes) -> bytes:
    size = len(content)
    if size < 0x80:
        return bytes([tag, size]) + content
    length = size.to_bytes((size.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length)]) + length + content


def _der_oid(dotted: str) -> bytes:
    first, second, *rest = (int(part) for part in dotted.split("."))
    body = bytearray([first * 40 + second])
    for arc in rest:
        chunk = [arc & 0x7F]
        while arc := arc >> 7:
            chunk.append(0x80 | (arc & 0x7F))
        body.extend(reversed(chunk))
    return _der(0x06, bytes(body))


def openssl_subject_hash(certificate: Path) -> str:
    """The name OpenSSL looks a CA up by in a hashed directory (`openssl x509 -hash`): the
    first four bytes, little-endian, of the SHA-1 of the subject's canonical encoding — each
    RDN's values as UTF8String, trimmed, inner whitespace collapsed, lower-cased, the RDN sets
    concatenated without the outer SEQUENCE."""
    subject = x509.load_pem_x509_certificate(certificate.read_bytes()).subject
    canonical = b""
    for rdn in subject.rdns:
        entries = []
        for attribute in rdn:
            text = " ".join(str(attribute.value).split()).lower()
            value = _der(0x0C, text.encode())
            entries.append(_der(0x30, _der_oid(attribute.oid.dotted_string) + value))
        canonical += _der(0x31, b"".join(sorted(entries)))
    digest = hashlib.sha1(canonical, usedforsecurity=False).digest()
    return f"{int.from_bytes(digest[:4], 'little'):08x}"


def hashed_directory(directory: Path, *certificates: Path) -> Path:
    """A CA directory as OpenSSL's `c_rehash` lays one out: each certificate as `<hash>.N`."""
    directory.mkdir(parents=True, exist_ok=True)
    for certificate in certificates:
        stem = openssl_subject_hash(certificate)
        index = 0
        while (directory / f"{stem}.{index}").exists():
            index += 1
        (directory / f"{stem}.{index}").write_bytes(certificate.read_bytes())
    return directory
