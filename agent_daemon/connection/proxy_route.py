"""Which proxy a request takes: `agent.toml` first, then the environment, per URL scheme.

    proxy in agent.toml          every request (http and https) goes through it
    else https_proxy / HTTPS_PROXY   for https:// URLs   (lower case first, as curl reads them)
    else http_proxy / HTTP_PROXY     for http:// URLs
    else all_proxy / ALL_PROXY       for both
    no_proxy in agent.toml, else no_proxy / NO_PROXY: hosts reached directly

The route is resolved once, when the client is built, so the proxy in use is what the daemon logs
at start and what `agent status` shows. A proxy URL that cannot be used — a bad URL, or a SOCKS
proxy without SOCKS support installed — is a `ConfigError` naming where it came from.
"""

from __future__ import annotations

import importlib.util
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from agent_daemon.connection.network_settings import (
    NetworkSettings,
    check_no_proxy_entry,
    check_proxy_url,
)
from agent_daemon.errors import ConfigError

__all__ = ["PROXY_VARIABLES", "ProxyChoice", "ProxyRoute", "resolve_route", "shown_proxy"]

_ENV_NAMES = {
    "https": ("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"),
    "http": ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"),
}
_NO_PROXY_NAMES = ("no_proxy", "NO_PROXY")
# Every environment variable the route reads.
PROXY_VARIABLES = frozenset({*_ENV_NAMES["https"], *_ENV_NAMES["http"], *_NO_PROXY_NAMES})


def shown_proxy(url: str) -> str:
    """The proxy URL with its password replaced by `***` (for logs and `status`)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}{port}"))


@dataclass(frozen=True, kw_only=True)
class ProxyChoice:
    url: str  # as configured (it may hold a password: show `shown`)
    source: str  # "agent.toml proxy", "environment HTTPS_PROXY", …

    @property
    def shown(self) -> str:
        return shown_proxy(self.url)


@dataclass(frozen=True, kw_only=True)
class ProxyRoute:
    https: ProxyChoice | None
    http: ProxyChoice | None
    no_proxy: tuple[str, ...]
    no_proxy_source: str | None  # "agent.toml no_proxy" or "environment NO_PROXY"

    def proxy_for(self, scheme: str, host: str) -> ProxyChoice | None:
        choice = self.https if scheme == "https" else self.http if scheme == "http" else None
        if choice is None or self.bypasses(host):
            return None
        return choice

    def bypasses(self, host: str) -> str | None:
        """The `no_proxy` entry that sends `host` direct, or None."""
        name = host.strip("[]").lower().rstrip(".")
        for entry in self.no_proxy:
            if _matches(entry, name):
                return entry
        return None

    def describe_for(self, url: str) -> str:
        """How a request to `url` travels, in words: `via http://proxy:3128 (agent.toml proxy)`,
        `direct (no proxy configured)`, `direct (control.example matches no_proxy entry …)`."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        choice = self.https if parts.scheme == "https" else self.http
        if choice is None:
            return "direct (no proxy configured)"
        entry = self.bypasses(host)
        if entry is not None:
            return f"direct ({host} matches {self.no_proxy_source} entry {entry!r})"
        return f"via {choice.shown} ({choice.source})"


def _matches(entry: str, host: str) -> bool:
    if entry == "*":
        return True
    try:
        network = ipaddress.ip_network(entry.strip("[]"), strict=False)
    except ValueError:
        network = None
    if network is not None:
        try:
            return ipaddress.ip_address(host) in network
        except ValueError:
            return False  # a name is never resolved to compare it with a network
    domain = entry.lower().lstrip("*").lstrip(".").rstrip(".")
    return host == domain or host.endswith("." + domain)


def _checked(url: str, *, source: str) -> ProxyChoice:
    # The environment's convention: a proxy without a scheme is an http proxy.
    if "://" not in url:
        url = f"http://{url}"
    try:
        check_proxy_url(url)
    except ValueError as exc:
        raise ConfigError(f"{source}: {shown_proxy(url)!r}: {exc}") from exc
    if urlsplit(url).scheme.lower().startswith("socks") and not _socks_available():
        raise ConfigError(
            f"{source}: {shown_proxy(url)!r} is a SOCKS proxy, but SOCKS support is not "
            "installed: pip install 'httpx[socks]' (the agent's package has it)"
        )
    return ProxyChoice(url=url, source=source)


def _socks_available() -> bool:
    return importlib.util.find_spec("socksio") is not None


def _from_environment(environ: Mapping[str, str], scheme: str) -> ProxyChoice | None:
    for name in _ENV_NAMES[scheme]:
        value = environ.get(name, "").strip()
        if value:
            return _checked(value, source=f"environment {name}")
    return None


def resolve_route(network: NetworkSettings, environ: Mapping[str, str]) -> ProxyRoute:
    """The proxy for each scheme and the hosts that bypass it (`agent.toml` wins)."""
    if network.proxy is not None:
        choice = _checked(network.proxy, source="agent.toml proxy")
        https: ProxyChoice | None = choice
        http: ProxyChoice | None = choice
    else:
        https = _from_environment(environ, "https")
        http = _from_environment(environ, "http")
    if network.no_proxy:
        return ProxyRoute(
            https=https, http=http, no_proxy=network.no_proxy, no_proxy_source="agent.toml no_proxy"
        )
    for name in _NO_PROXY_NAMES:
        value = environ.get(name, "").strip()
        if not value:
            continue
        entries = tuple(item.strip() for item in value.split(",") if item.strip())
        for entry in entries:
            try:
                check_no_proxy_entry(entry)
            except ValueError as exc:
                raise ConfigError(f"environment {name}: {entry!r}: {exc}") from exc
        return ProxyRoute(
            https=https, http=http, no_proxy=entries, no_proxy_source=f"environment {name}"
        )
    return ProxyRoute(https=https, http=http, no_proxy=(), no_proxy_source=None)
