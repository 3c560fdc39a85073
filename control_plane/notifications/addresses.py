"""Where the control plane may connect when an organisation names the address: its webhook, and
its own OpenID Connect provider (discovery, keys, token endpoint). The control plane connects from
inside our network, so an organisation's URL must not make it a probe of that network (a blind
SSRF: `http://169.254.169.254/` is the cloud metadata service, `http://10.0.0.5:6379/` someone's
Redis).

The rule: the address a request connects to must be a public (globally routable) unicast
address. Loopback, link-local (169.254.0.0/16, fe80::/10), private (10/8, 172.16/12, 192.168/16,
fc00::/7), shared (100.64/10), unspecified, multicast, reserved and documentation ranges are
refused — unless the operator allowed a network explicitly (`serve --outbound-allow-network
CIDR`, the older name `--webhook-allow-network` too; e.g. 127.0.0.0/8 for a receiver on the same
machine, or an on-premises range).

Checked twice. When the URL is stored: the scheme (http, https), a host, a valid port, and — when
the host is an address literal or `localhost` — the address. When a request is sent
(`pinned_send`): the host name is resolved, every address it resolves to must pass, and the
connection goes to the address that was checked (the Host header and TLS name stay the URL's), so
a DNS answer that changes between the check and the connection cannot slip past. Redirects are
never followed: a 3xx is the answer, not a way to another address.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit

import httpx

__all__ = [
    "ADDRESS_REFUSED",
    "AddressNotAllowed",
    "IPAddress",
    "IPNetwork",
    "Resolver",
    "WebhookAddressPolicy",
    "WebhookAddressRefused",
    "pinned_send",
    "resolve_host",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# host, port -> the addresses a connection could go to (socket.getaddrinfo's answer, reduced).
Resolver = Callable[[str, int], list[IPAddress]]

MAX_URL_LENGTH = 2000
# The code of a refusal of a well-formed URL whose address is not one the control plane may
# connect to (the API's `code`; the panel words it apart from a malformed URL).
ADDRESS_REFUSED = "address_refused"


class WebhookAddressRefused(ValueError):
    """The URL, or an address its host resolves to, is not one the control plane may connect to
    (a webhook's delivery or an OpenID Connect provider's request)."""


class AddressNotAllowed(WebhookAddressRefused):
    """A well-formed URL whose address is not public and not in a network the operator allowed
    (loopback, private, link-local, …), as opposed to a URL of the wrong shape."""


def resolve_host(host: str, port: int) -> list[IPAddress]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


def _why_refused(address: IPAddress) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _why_refused(address.ipv4_mapped)
    for kind, refused in (
        ("unspecified", address.is_unspecified),
        ("loopback", address.is_loopback),
        ("link-local", address.is_link_local),
        ("multicast", address.is_multicast),
        ("private", address.is_private),
        ("reserved", address.is_reserved),
        ("not globally routable", not address.is_global),
    ):
        if refused:
            return kind
    return None


@dataclass(frozen=True, kw_only=True)
class WebhookAddressPolicy:
    """Which addresses the control plane may reach for an organisation (its webhook, its OpenID
    Connect provider): public ones, and the networks an operator allowed."""

    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def allowing(cls, networks: Iterable[str]) -> WebhookAddressPolicy:
        """From CIDR texts (`127.0.0.0/8`); a bad one raises ValueError naming it."""
        parsed = []
        for text in networks:
            try:
                parsed.append(ipaddress.ip_network(text.strip(), strict=False))
            except ValueError as exc:
                raise ValueError(
                    f"{text!r} is not a network (expected CIDR, e.g. 10.0.0.0/8)"
                ) from exc
        return cls(allowed_networks=tuple(parsed))

    def check_address(self, address: IPAddress) -> None:
        if any(address in network for network in self.allowed_networks):
            return
        why = _why_refused(address)
        if why is not None:
            raise AddressNotAllowed(
                f"{address} is a {why} address; the control plane connects to public addresses "
                "only (an operator can allow a network: serve --outbound-allow-network CIDR)"
            )

    def check_url(self, url: str) -> SplitResult:
        """The URL's parts if it may be stored; else WebhookAddressRefused saying why."""
        shape = (
            f"must be an http:// or https:// URL with a host (at most {MAX_URL_LENGTH} characters)"
        )
        if len(url) > MAX_URL_LENGTH:
            raise WebhookAddressRefused(shape)
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError as exc:  # an unbalanced "[" in the host, say
            raise WebhookAddressRefused(shape) from exc
        if parts.scheme not in {"http", "https"} or not host:
            raise WebhookAddressRefused(shape)
        if parts.username is not None or parts.password is not None:
            raise WebhookAddressRefused("must not carry a user name or password")
        try:
            port = parts.port
        except ValueError as exc:
            raise WebhookAddressRefused("has a port that is not a number from 1 to 65535") from exc
        if port == 0:
            raise WebhookAddressRefused("has a port that is not a number from 1 to 65535")
        try:
            host.encode("idna")
        except UnicodeError as exc:
            raise WebhookAddressRefused(
                f"has a host name that is not valid: {host[:60]!r}"
            ) from exc
        literal = _address_literal(host)
        if literal is not None:
            self.check_address(literal)
        elif host == "localhost" or host.endswith(".localhost"):
            self.check_address(ipaddress.ip_address("127.0.0.1"))
        return parts

    def connect_address(self, host: str, port: int, resolve: Resolver) -> IPAddress:
        """The checked address a delivery to `host` connects to: every address the name resolves
        to must be allowed (one refused address refuses the name), the first is used."""
        literal = _address_literal(host)
        addresses = [literal] if literal is not None else resolve(host, port)
        if not addresses:
            raise WebhookAddressRefused(f"{host!r} resolves to no address")
        for address in addresses:
            try:
                self.check_address(address)
            except WebhookAddressRefused as exc:
                raise WebhookAddressRefused(f"{host!r} resolves to {exc}") from exc
        return addresses[0]


def pinned_send(
    client: httpx.Client,
    policy: WebhookAddressPolicy,
    resolve: Resolver,
    method: str,
    url: str,
    **request: Any,
) -> httpx.Response:
    """One request to the address `policy` checked, with the URL's own Host header and TLS name;
    `request` is httpx's (content, data, headers, auth). Never follows a redirect."""
    target = httpx.URL(url)
    port = target.port or (443 if target.scheme == "https" else 80)
    address = policy.connect_address(target.host, port, resolve)
    pinned = target.copy_with(host=str(address))
    extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
    # An IPv6 literal is bracketed in a Host header, as in the URL.
    named = f"[{target.host}]" if ":" in target.host else target.host
    host_header = named if target.port is None else f"{named}:{target.port}"
    headers = {**request.pop("headers", {}), "Host": host_header}
    return client.request(
        method,
        pinned,
        headers=headers,
        extensions=extensions,
        follow_redirects=False,
        **request,
    )


_NUMERIC_HOST = re.compile(r"[0-9a-fA-Fx.]+")


def _address_literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        pass
    # `2130706433`, `0x7f.1`, `127.1`: forms the C resolver reads as IPv4 without asking DNS.
    if _NUMERIC_HOST.fullmatch(host) and any(c.isdigit() for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None
