"""The networking part of `nachtwacht agent`: `enroll`'s proxy and trust flags, the proxy it takes
from this shell's environment, the start-up log lines, and the lines `status` adds
(`agent_daemon.connection.http_client.network_facts` says what they show).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from agent_daemon.connection.http_client import network_facts
from agent_daemon.connection.network_settings import NetworkSettings
from agent_daemon.connection.proxy_route import PROXY_VARIABLES, resolve_route
from agent_daemon.host.event_log import EventLog
from agent_daemon.settings import AgentSettings

__all__ = [
    "InheritedProxy",
    "add_network_options",
    "as_the_service_sees_it",
    "inherited_proxy",
    "log_network",
    "network_fields",
    "network_status_lines",
]


def add_network_options(enroll: argparse.ArgumentParser) -> None:
    """`enroll`'s proxy and trust flags; each becomes the `agent.toml` field of the same name."""
    network = enroll.add_argument_group("network and trust (docs/agent_daemon.md)")
    network.add_argument(
        "--proxy",
        help="http://, https://, socks5:// or socks5h:// proxy (default: the one this shell's "
        "HTTPS_PROXY etc. gives the control URL, written to the config; '' for none)",
    )
    network.add_argument(
        "--no-proxy",
        action="append",
        metavar="HOSTS",
        help="hosts, IP addresses or CIDR networks reached directly (comma-separated, repeatable)",
    )
    network.add_argument(
        "--ca-file", metavar="PEM", help="a CA bundle trusted in addition to the OS trust store"
    )
    network.add_argument(
        "--pinned-public-key-sha256",
        metavar="DIGEST",
        help="sha256 of the control plane's SubjectPublicKeyInfo (base64 or hex)",
    )
    network.add_argument("--client-cert", metavar="PEM", help="client certificate for mTLS")
    network.add_argument("--client-key", metavar="PEM", help="its private key (mode 0600)")
    network.add_argument(
        "--insecure-http",
        action="store_true",
        help="allow a plain http:// control URL to a host other than loopback (warned at start)",
    )


def network_fields(args: argparse.Namespace) -> dict[str, str | bool | list[str]]:
    fields: dict[str, str | bool | list[str]] = {}
    if args.proxy:
        fields["proxy"] = args.proxy
    if args.no_proxy:
        fields["no_proxy"] = list(_no_proxy_entries(args))
    for name in ("ca_file", "client_cert", "client_key"):
        if getattr(args, name):
            fields[name] = str(Path(getattr(args, name)).absolute())
    if args.pinned_public_key_sha256:
        fields["pinned_public_key_sha256"] = args.pinned_public_key_sha256
    if args.insecure_http:
        fields["insecure_http"] = True
    return fields


@dataclass(frozen=True, kw_only=True)
class InheritedProxy:
    """The proxy this shell's environment gives the control URL, to be written to the config."""

    url: str  # as found: it may hold a password (show it with `shown_proxy`)
    source: str  # "environment HTTPS_PROXY", …
    # The environment's NO_PROXY entries, kept with it (None given with --no-proxy).
    no_proxy: tuple[str, ...]


def inherited_proxy(
    args: argparse.Namespace, *, control_url: str, environ: Mapping[str, str]
) -> InheritedProxy | None:
    """The proxy `environ` routes `control_url` through, when `--proxy` was not given.

    The service does not see the shell's environment: a proxy enroll used only because this shell
    has HTTPS_PROXY would be gone when the daemon starts. `--proxy ''` asks for none."""
    if args.proxy is not None:
        return None
    try:
        parts = urlsplit(control_url)
    except ValueError:
        return None  # a URL that cannot be read: the staged config names it by its flag
    given = _no_proxy_entries(args)
    # Not validated here: the staged config names a bad --no-proxy entry by its flag.
    route = resolve_route(NetworkSettings.model_construct(no_proxy=given), environ)
    choice = route.proxy_for(parts.scheme, parts.hostname or "")
    if choice is None:
        return None
    from_environment = not given and route.no_proxy_source is not None
    return InheritedProxy(
        url=choice.url, source=choice.source, no_proxy=route.no_proxy if from_environment else ()
    )


def as_the_service_sees_it(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without its proxy variables: enroll reaches the control plane as the service
    will, through the config's proxy or none."""
    return {name: value for name, value in environ.items() if name not in PROXY_VARIABLES}


def _no_proxy_entries(args: argparse.Namespace) -> tuple[str, ...]:
    values: list[str] = args.no_proxy or []
    return tuple(item.strip() for value in values for item in value.split(",") if item.strip())


def log_network(log: EventLog, settings: AgentSettings, environ: Mapping[str, str]) -> None:
    """The proxy and trust in use, at every start; plain http to a non-loopback host warned."""
    facts = network_facts(settings.control_url, settings.network, environ)
    log.emit(
        "network.configured",
        control_url=settings.control_url,
        route=facts["route"],
        no_proxy=facts["no_proxy"],
        trust=facts["trust"],
        pinned_public_key_sha256=facts["pinned_public_key_sha256"],
        client_cert=facts["client_cert"],
    )
    if settings.control_url.startswith("http://") and settings.network.insecure_http:
        log.emit(
            "network.insecure_http",
            level="warning",
            control_url=settings.control_url,
            message="plain http allowed by insecure_http: the agent's credential travels in clear",
        )


def network_status_lines(facts: Mapping[str, str | None]) -> str:
    """The status lines about networking (the proxy as this shell's environment sees it). Status
    contacts nothing: the route is the configured one, not one just tried."""
    lines = [f"{'network:':<15}configured route: {facts['route']}"]
    if facts["no_proxy"]:
        lines.append(f"{'no proxy for:':<15}{facts['no_proxy']}")
    trust = str(facts["trust"])
    if facts["pinned_public_key_sha256"]:
        trust += f"; public key pinned (sha256 {facts['pinned_public_key_sha256']})"
    if facts["client_cert"]:
        trust += f"; client certificate {facts['client_cert']}"
    lines.append(f"{'trust:':<15}{trust}")
    if facts["insecure_http"]:
        lines.append(f"{'plain http:':<15}{facts['insecure_http']}")
    return "\n".join(lines)
