"""Where the artifact may be fetched from, and whether the agent's credential may go along.

The artifact URL comes from the control plane's answer: untrusted input. The bytes it leads to are
checked against the signed length and hash, so a wrong URL cannot install anything — but the
request carries the agent's credential (the daemon's client sends it with every request), and the
URL decides where that goes. So, before anything is stored or fetched:

* the URL must parse (as `httpx` will read it), be absolute `http(s)`, carry no user-info, and be
  at most `MAX_URL_LENGTH` characters;
* its origin (scheme, host, port) must be the control plane's own (the client's `base_url`) or one
  the operator listed in `artifact_origins` (agent.toml);
* the credential is sent only to the control plane's own origin, and only over https or to a
  loopback host; an operator-listed origin (a mirror, a CDN) is fetched without it.

An updater whose client has no `base_url` is not working for a control plane (a standalone
pre-install, a test): there is no origin to hold the URL to, and nothing is sent with a
credential. The daemon's client always has one (`agent_daemon.connection.http_client`).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import httpx

from agent_daemon.errors import UntrustedArtifactSource

__all__ = [
    "MAX_URL_LENGTH",
    "ArtifactSource",
    "Origin",
    "is_loopback",
    "parse_origin",
    "resolve_source",
]

# The contract's bound on `artifact_url` (ground.contract.ClaimedRelease).
MAX_URL_LENGTH = 2048
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, kw_only=True)
class Origin:
    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True, kw_only=True)
class ArtifactSource:
    url: str
    origin: Origin
    send_credential: bool


def _shown(text: str) -> str:
    value = repr(text)
    return value if len(value) <= 120 else value[:117] + "..."


def _origin(text: str, *, what: str) -> tuple[Origin, httpx.URL]:
    if len(text) > MAX_URL_LENGTH:
        raise UntrustedArtifactSource(
            f"{what}: {_shown(text)} is {len(text)} characters long (at most {MAX_URL_LENGTH})"
        )
    if any(ord(character) < 0x21 or ord(character) == 0x7F for character in text):
        raise UntrustedArtifactSource(
            f"{what}: {_shown(text)} holds spaces or control characters (expected a URL)"
        )
    try:
        url = httpx.URL(text)
        port = url.port
    except (httpx.InvalidURL, ValueError, TypeError) as exc:
        raise UntrustedArtifactSource(f"{what}: {_shown(text)} is not a URL ({exc})") from exc
    if url.scheme not in _DEFAULT_PORTS or not url.host:
        raise UntrustedArtifactSource(f"{what}: {_shown(text)} is not an absolute http(s) URL")
    if port is not None and not 0 < port < 65536:
        raise UntrustedArtifactSource(
            f"{what}: {_shown(text)} names port {port} (expected 1-65535)"
        )
    if url.userinfo:
        raise UntrustedArtifactSource(
            f"{what}: {_shown(text)} carries user-info (expected no credentials in a URL)"
        )
    origin = Origin(
        scheme=url.scheme, host=url.host.lower(), port=port or _DEFAULT_PORTS[url.scheme]
    )
    return origin, url


def parse_origin(text: str) -> Origin:
    """An operator's `artifact_origins` entry: `http(s)://host[:port]`, nothing after it."""
    origin, url = _origin(text, what="artifact_origins")
    if url.raw_path not in (b"", b"/") or url.query or url.fragment:
        raise ValueError("expected an origin such as https://mirror.example:8443 (no path)")
    return origin


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_source(
    url: str, *, control: Origin | None, allowed: tuple[Origin, ...]
) -> ArtifactSource:
    """The checked source of `url`, or `UntrustedArtifactSource` saying why not."""
    origin, _ = _origin(url, what="artifact_url")
    if control is None:
        return ArtifactSource(url=url, origin=origin, send_credential=False)
    if origin == control:
        secure = origin.scheme == "https" or is_loopback(origin.host)
        return ArtifactSource(url=url, origin=origin, send_credential=secure)
    if origin in allowed:
        return ArtifactSource(url=url, origin=origin, send_credential=False)
    listed = ", ".join(str(item) for item in allowed) or "none"
    raise UntrustedArtifactSource(
        f"artifact_url: {_shown(url)} is on {origin}, which is neither the control plane's "
        f"origin ({control}) nor listed in artifact_origins ({listed})"
    )


def control_origin(client: httpx.Client) -> Origin | None:
    """The origin of the client's `base_url` (the control plane), None for a client without."""
    base = str(client.base_url)
    if not base:
        return None
    try:
        return _origin(base, what="control_url")[0]
    except UntrustedArtifactSource:
        return None
