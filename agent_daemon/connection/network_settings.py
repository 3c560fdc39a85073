"""How the agent reaches its control plane from inside a customer's network: proxy and trust.

The `agent.toml` fields (all optional, each an `enroll` flag too):

    proxy                     http://, https://, socks5:// or socks5h:// proxy for every request
                              (wins over HTTPS_PROXY / HTTP_PROXY / ALL_PROXY)
    no_proxy                  hosts reached directly: names (a name covers its subdomains), IP
                              addresses, CIDR networks, or "*" (wins over NO_PROXY)
    ca_file                   a PEM bundle trusted *in addition to* the OS trust store
    pinned_public_key_sha256  the sha256 of the control plane's SubjectPublicKeyInfo, base64 (as
                              `openssl … | base64`, 44 characters) or hex (64 characters)
    client_cert, client_key   a PEM certificate (and its key) for control planes that ask for one
    insecure_http             allow a plain http:// control URL to a host other than loopback

Validated when built (`ConfigError` naming the field, the value and what was expected); the files
are checked when the settings are loaded and read when the HTTP client is built
(`agent_daemon.connection.http_client`).
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from agent_daemon.errors import ConfigError
from agent_daemon.path_fields import AbsolutePath

__all__ = [
    "MAX_PEM_FILE_BYTES",
    "NETWORK_FILE_FIELDS",
    "PROXY_SCHEMES",
    "NetworkSettings",
    "check_control_url_transport",
    "check_no_proxy_entry",
    "check_proxy_url",
    "is_loopback_host",
    "parse_pin",
    "pem_file_too_large",
]

PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")
# The most `ca_file`, `client_cert` and `client_key` may each hold: a host's whole public bundle
# (about 200 KiB) with a private CA added fits many times over; OpenSSL never reads further.
MAX_PEM_FILE_BYTES = 1024 * 1024


def pem_file_too_large(field: str, path: Path) -> ConfigError:
    """The refusal of a PEM file past `MAX_PEM_FILE_BYTES`, when loaded and when read."""
    return ConfigError(
        f"{field}: {str(path)!r} is larger than {MAX_PEM_FILE_BYTES} bytes — expected a PEM file"
    )


_HOST_NAME = re.compile(r"(?:\*?\.)?[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?")


def check_proxy_url(value: str) -> str:
    """The proxy URL as given, or ValueError saying what was expected."""
    parts = urlsplit(value)
    if parts.scheme.lower() not in PROXY_SCHEMES:
        raise ValueError(
            "expected a proxy URL such as http://proxy.example:3128 or "
            "socks5h://proxy.example:1080 (schemes: http, https, socks5, socks5h)"
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"expected a port from 1 to 65535 ({exc})") from exc
    if not parts.hostname:
        raise ValueError("expected a host, e.g. http://proxy.example:3128")
    if port == 0:
        raise ValueError("expected a port from 1 to 65535")
    if parts.path not in {"", "/"} or parts.query or parts.fragment:
        raise ValueError("expected scheme://[user:password@]host:port without a path or ?query")
    return value


def check_no_proxy_entry(value: str) -> str:
    """One `no_proxy` entry: `*`, an IP address, a CIDR network, or a host name (`.example.com`
    and `*.example.com` are read as `example.com`: the name and its subdomains)."""
    entry = value.strip()
    if entry == "*":
        return entry
    try:
        ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        pass
    else:
        return entry
    if not _HOST_NAME.fullmatch(entry):
        raise ValueError(
            "expected a host name (example.com covers its subdomains), an IP address, "
            "a CIDR network such as 10.0.0.0/8, or *"
        )
    return entry


def parse_pin(value: str) -> bytes:
    """The 32 bytes a `pinned_public_key_sha256` names (base64, hex, or curl's `sha256//` form)."""
    text = value.strip().removeprefix("sha256//")
    if re.fullmatch(r"[0-9a-fA-F]{64}", text) or re.fullmatch(
        r"(?:[0-9a-fA-F]{2}:){31}[0-9a-fA-F]{2}", text
    ):
        return bytes.fromhex(text.replace(":", ""))
    try:
        digest = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        digest = b""
    if len(digest) != 32:
        raise ValueError(
            "expected the sha256 of the control plane's public key (SubjectPublicKeyInfo): "
            "44 characters of base64 or 64 hex digits"
        )
    return digest


def _pin(value: str) -> str:
    parse_pin(value)
    return value


ProxyUrl = Annotated[str, AfterValidator(check_proxy_url)]
NoProxyEntry = Annotated[str, AfterValidator(check_no_proxy_entry)]
PinnedKey = Annotated[str, AfterValidator(_pin)]


class NetworkSettings(BaseModel):
    """The agent's proxy and trust settings (`AgentSettings.network`); every field optional."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    proxy: ProxyUrl | None = Field(default=None, repr=False)  # may carry a password
    no_proxy: tuple[NoProxyEntry, ...] = Field(default=(), max_length=64)
    ca_file: AbsolutePath | None = None
    pinned_public_key_sha256: PinnedKey | None = None
    client_cert: AbsolutePath | None = None
    client_key: AbsolutePath | None = None
    insecure_http: bool = Field(default=False, strict=True)

    @model_validator(mode="after")
    def _key_needs_its_certificate(self) -> NetworkSettings:
        if self.client_key is not None and self.client_cert is None:
            raise ValueError("client_key is set without client_cert: set both (or neither)")
        return self


# The fields `agent.toml` holds for this section (the file is flat: `proxy = "…"` at the top).
NETWORK_FILE_FIELDS = tuple(NetworkSettings.model_fields)


def is_loopback_host(host: str) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1: traffic that never leaves the host."""
    name = host.strip("[]").lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_control_url_transport(control_url: str, *, insecure_http: bool) -> None:
    """Plain http carries the agent's bearer credential in clear: only to loopback, or when the
    administrator allowed it explicitly."""
    parts = urlsplit(control_url)
    if parts.scheme != "http" or insecure_http or is_loopback_host(parts.hostname or ""):
        return
    raise ConfigError(
        f"control_url: {control_url!r} is plain http, so the agent's credential would travel in "
        "clear; use https://, or allow it with --insecure-http (insecure_http = true)"
    )
