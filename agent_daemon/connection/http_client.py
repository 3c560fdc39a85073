"""The agent's one `httpx.Client`, built in one place: the one seam of its network I/O.

Every connection the agent opens — the config sync, claims, reports and the artifact download —
comes from `build_http_client`, so the proxy (`proxy_route`), the trust store, the pin and the
client certificate (`tls_trust`) apply to all of them alike. A failure of trust is re-raised as
the same `httpx` error with one sentence naming the fix.

Tests and benchmarks pass a `transport=` to stand in for the control plane (no proxy, no TLS).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

import httpx

from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.proxy_route import ProxyChoice, ProxyRoute, resolve_route
from agent_daemon.connection.tls_trust import (
    PublicKeyPinMismatch,
    build_ssl_context,
    check_pin,
    explain_failure,
)
from agent_daemon.errors import ConfigError
from ground.contract import CONTRACT_VERSION, CONTRACT_VERSION_HEADER, HOST_ID_HEADER

__all__ = [
    "PROXY_EXTENSION",
    "USER_AGENT",
    "build_http_client",
    "local_host_id",
    "network_facts",
]

USER_AGENT = "nachtwacht-agent"
# The response extension naming the proxy that carried the request (absent when it went direct).
PROXY_EXTENSION = "nachtwacht_proxy"

_MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))

Trace = Callable[[str, dict[str, Any]], None]


def local_host_id(files: tuple[Path, ...] = _MACHINE_ID_FILES) -> str | None:
    """A stable id of this host for `HOST_ID_HEADER`, or None when the host has none.

    Derived from the machine id (systemd's, stable across reboots) by a hash, so the control
    plane learns that two hosts differ without learning either machine id."""
    for path in files:
        try:
            machine_id = path.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            continue
        if machine_id:
            return hashlib.sha256(f"nachtwacht-host:{machine_id}".encode()).hexdigest()[:32]
    return None


class _TlsWatch:
    """Follows one request's TLS handshakes (httpcore's `trace` extension): remembers whose
    certificate was checked last and checks the pin on the control plane's host before the
    request — and the credential in it — is sent."""

    def __init__(self, *, outer: Trace | None, pin: str | None, control_host: str) -> None:
        self._outer = outer
        self._pin = pin
        self._control_host = control_host
        self.host: str | None = None

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if self._outer is not None:
            self._outer(event, info)
        if event.endswith("start_tls.started"):
            self.host = str(info.get("server_hostname") or "").lower() or None
        elif event.endswith("start_tls.complete") and self._pin and self.host == self._control_host:
            stream = info["return_value"]
            try:
                check_pin(stream.get_extra_info("ssl_object"), pin=self._pin, host=self.host)
            except PublicKeyPinMismatch:
                stream.close()
                raise


class _AgentTransport(httpx.BaseTransport):
    """Direct or through the proxy, per request; the pin; failures explained."""

    def __init__(self, *, network: NetworkSettings, route: ProxyRoute, control_host: str) -> None:
        self._network = network
        self._route = route
        self._control_host = control_host
        context = build_ssl_context(network)
        self._direct = httpx.HTTPTransport(verify=context, trust_env=False)
        self._proxied: dict[str, httpx.HTTPTransport] = {}
        for choice in (route.https, route.http):
            if choice is None or choice.url in self._proxied:
                continue
            try:
                self._proxied[choice.url] = httpx.HTTPTransport(
                    verify=context,
                    trust_env=False,
                    # An https:// proxy's own certificate is checked with the same trust.
                    proxy=httpx.Proxy(
                        choice.url,
                        ssl_context=context if choice.url.lower().startswith("https:") else None,
                    ),
                )
            except (ImportError, ValueError, httpx.InvalidURL) as exc:
                raise ConfigError(
                    f"{choice.source}: {choice.shown!r} cannot be used ({exc})"
                ) from exc

    def _choose(self, url: httpx.URL) -> tuple[httpx.HTTPTransport, ProxyChoice | None]:
        choice = self._route.proxy_for(url.scheme, url.host)
        return (self._direct, None) if choice is None else (self._proxied[choice.url], choice)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        transport, choice = self._choose(request.url)
        watch = _TlsWatch(
            outer=request.extensions.get("trace"),
            pin=self._network.pinned_public_key_sha256,
            control_host=self._control_host,
        )
        request.extensions = {**request.extensions, "trace": watch.trace}
        try:
            response = transport.handle_request(request)
        except PublicKeyPinMismatch as exc:
            raise httpx.ConnectError(str(exc), request=request) from exc
        except httpx.TransportError as exc:
            proxy = None if choice is None else httpx.URL(choice.url)
            tls_to_proxy = (
                proxy is not None and proxy.scheme == "https" and watch.host == proxy.host
            )
            message = explain_failure(
                exc,
                tls_host=watch.host,
                control_host=self._control_host,
                network=self._network,
                tls_port=_port(proxy if tls_to_proxy and proxy else request.url),
                proxy_host=None if proxy is None or proxy.scheme != "https" else proxy.host,
            )
            if message is None and choice is not None:
                message = _proxy_refusal(exc, choice, request.url) or (
                    f"{exc} (through the proxy {choice.shown}, from {choice.source})"
                )
            if message is None:
                raise
            raise type(exc)(message, request=request) from exc
        if response.status_code == HTTPStatus.PROXY_AUTHENTICATION_REQUIRED:
            # Only a proxy answers 407; its page is no news to the admin, its meaning is.
            response.close()
            raise httpx.ProxyError(_proxy_credentials_refused(choice), request=request)
        if choice is not None:
            # Whatever answered, the proxy carried the request: a message about an answer that is
            # not the control plane's names it (`ControlPlaneClient`).
            response.extensions[PROXY_EXTENSION] = f"{choice.shown} ({choice.source})"
        return response

    def close(self) -> None:
        self._direct.close()
        for transport in self._proxied.values():
            transport.close()


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


def _proxy_credentials_refused(choice: ProxyChoice | None) -> str:
    if choice is None:
        return (
            "a proxy on the way asks for credentials (407 Proxy Authentication Required), but none "
            "is configured: set `proxy` in agent.toml (--proxy http://user:password@host:port)"
        )
    named = httpx.URL(choice.url).username
    fix = (
        "check the user and password in its URL"
        if named
        else "give a user and password in its URL (http://user:password@host:port)"
    )
    return (
        f"the proxy {choice.shown} ({choice.source}) refused the proxy credentials "
        f"(407 Proxy Authentication Required): {fix}"
    )


def _proxy_refusal(exc: httpx.TransportError, choice: ProxyChoice, url: httpx.URL) -> str | None:
    """A proxy's refusal of the tunnel (`CONNECT`), in words; None for any other failure. The
    proxy's 401 is the proxy's: the control plane was never asked."""
    if not isinstance(exc, httpx.ProxyError):
        return None
    status, _, _ = str(exc).partition(" ")
    if not status.isdigit():
        return None
    if int(status) == HTTPStatus.PROXY_AUTHENTICATION_REQUIRED:
        return _proxy_credentials_refused(choice)
    return (
        f"the proxy {choice.shown} ({choice.source}) refused the tunnel to {url.host}:{_port(url)} "
        f"({exc}); the control plane was not reached"
    )


def build_http_client(
    *,
    base_url: str,
    credential: str,
    timeout_seconds: float,
    transport: httpx.BaseTransport | None = None,
    host_id: str | None = None,
    network: NetworkSettings | None = None,
    environ: Mapping[str, str] | None = None,
) -> httpx.Client:
    """`timeout_seconds` is real time (the caller converts product seconds with its clock).
    `host_id` defaults to `local_host_id()`; without one no host id is sent. `environ` (default:
    this process's) supplies HTTPS_PROXY and friends where `network` names no proxy. A proxy or
    trust file that cannot be used is a `ConfigError` naming its field."""
    headers = {
        "Authorization": f"Bearer {credential}",
        "User-Agent": USER_AGENT,
        # Which contract this agent reads answers by: a control plane that no longer serves it
        # says so in words, instead of answering what this agent would misread.
        CONTRACT_VERSION_HEADER: str(CONTRACT_VERSION),
    }
    chosen = host_id or local_host_id()
    if chosen is not None:
        # Lets the control plane see one credential answered from two hosts (a copied credential).
        headers[HOST_ID_HEADER] = chosen
    if transport is None:
        settings = network if network is not None else NetworkSettings()
        transport = _AgentTransport(
            network=settings,
            route=resolve_route(settings, os.environ if environ is None else environ),
            control_host=(httpx.URL(base_url).host or "").lower(),
        )
    return httpx.Client(
        base_url=base_url,
        headers=headers,
        timeout=httpx.Timeout(timeout_seconds),
        transport=transport,
        # The environment is read once, by `resolve_route` (agent.toml wins over it).
        trust_env=False,
        # A redirect would carry the credential somewhere the config did not name.
        follow_redirects=False,
    )


def network_facts(
    control_url: str, network: NetworkSettings, environ: Mapping[str, str]
) -> dict[str, str | None]:
    """How the agent reaches `control_url`, in words: for the start-up log line and `status`.
    A proxy that cannot be used is named in `route` rather than raised."""
    try:
        route = resolve_route(network, environ)
        travels = route.describe_for(control_url)
        no_proxy = ", ".join(route.no_proxy) if route.no_proxy else None
    except ConfigError as exc:
        travels, no_proxy = f"unusable proxy: {exc}", None
    trust = "the OS trust store"
    if network.ca_file is not None:
        trust += f" + ca_file {network.ca_file}"
    return {
        "route": travels,
        "no_proxy": no_proxy,
        "trust": trust,
        "pinned_public_key_sha256": network.pinned_public_key_sha256,
        "client_cert": None if network.client_cert is None else str(network.client_cert),
        "insecure_http": "allowed (insecure_http = true)" if network.insecure_http else None,
    }
