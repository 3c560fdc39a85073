"""Small threaded proxies on loopback: HTTP (CONNECT tunnels and forwarded plain requests) and
SOCKS5 (no authentication, CONNECT only). Each records the destinations it was asked for and maps
host names through `hosts` (a made-up name → a loopback port), so nothing leaves 127.0.0.1."""

from __future__ import annotations

import base64
import contextlib
import select
import socket
import ssl
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# A tunnel with no traffic either way for this long is given up.
_IDLE_SECONDS = 30.0


@dataclass
class Proxy:
    port: int
    scheme: str
    hosts: dict[str, int]
    destinations: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
    # An HTTP proxy that wants `Proxy-Authorization: Basic base64(user:password)`; without it (or
    # with other credentials) it answers `refusal` with a page, as a corporate proxy does.
    credentials: tuple[str, str] | None = None
    refusal: int = 407

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def connect(self, host: str, port: int) -> socket.socket:
        self.destinations.append(f"{host}:{port}")
        # Only loopback is ever reached: a name the test did not map goes nowhere.
        mapped = self.hosts.get(host, port if host in {"127.0.0.1", "localhost"} else 0)
        if not mapped:
            raise OSError(f"unknown host {host}")
        return socket.create_connection(("127.0.0.1", mapped), timeout=10)


def _pipe(one: socket.socket, other: socket.socket) -> None:
    """Copy both ways until both ends have closed, in this one thread: an https:// proxy's client
    side is one TLS connection, and OpenSSL's connection must not be read in one thread while it is
    written in another (two copying threads did that; now and then the agent got a corrupted
    record: "tlsv1 alert decode error")."""
    towards = {one: other, other: one}
    while towards:
        # Bytes TLS has already decrypted are not seen by select(); they are read first.
        ready = [s for s in towards if isinstance(s, ssl.SSLSocket) and s.pending()]
        if not ready:
            ready, _, _ = select.select(list(towards), [], [], _IDLE_SECONDS)
            if not ready:
                return  # both ends quiet for longer than any test waits
        for source in ready:
            sink = towards[source]
            try:
                data = source.recv(65536)
            except ssl.SSLWantReadError:
                continue  # part of a record: the rest comes with the next select
            except OSError:
                data = b""
            if data:
                with contextlib.suppress(OSError):
                    sink.sendall(data)
                continue
            del towards[source]  # this end is done sending: tell the other end
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)


def _read_head(client: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = client.recv(4096)
        if not chunk:
            raise OSError("closed before the request head ended")
        data += chunk
    return data


_REFUSAL_PAGE = (
    b"<!DOCTYPE html>\n<html>\n<head><title>Access denied</title></head>\n"
    b"<body><h1>Proxy authentication required</h1>\n<p>Sign in to the corporate proxy.</p>\n"
    b"</body></html>\n"
)
_REASONS = {401: "Unauthorized", 407: "Proxy Authentication Required"}


def _refused(proxy: Proxy, head: bytes) -> bool:
    """Whether the request lacks the proxy's credentials: then its refusal page is sent."""
    if proxy.credentials is None:
        return False
    user, password = proxy.credentials
    wanted = b"proxy-authorization: basic " + base64.b64encode(f"{user}:{password}".encode())
    return wanted.lower() not in [line.lower() for line in head.split(b"\r\n")]


def _send_refusal(proxy: Proxy, client: socket.socket) -> None:
    challenge = "Proxy-Authenticate" if proxy.refusal == 407 else "WWW-Authenticate"
    client.sendall(
        f"HTTP/1.1 {proxy.refusal} {_REASONS[proxy.refusal]}\r\n"
        f'{challenge}: Basic realm="corp"\r\nContent-Type: text/html\r\n'
        f"Content-Length: {len(_REFUSAL_PAGE)}\r\nConnection: close\r\n\r\n".encode()
        + _REFUSAL_PAGE
    )


def _http_proxy(proxy: Proxy, client: socket.socket) -> None:
    data = _read_head(client)
    head, _, rest = data.partition(b"\r\n\r\n")
    method, target, version = head.split(b"\r\n")[0].decode().split(" ")
    if _refused(proxy, head):
        _send_refusal(proxy, client)
        return
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        upstream = proxy.connect(host.strip("[]"), int(port))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        with upstream:
            if rest:
                upstream.sendall(rest)
            _pipe(client, upstream)
        return
    # A plain http request in absolute form: forwarded with its path only.
    scheme_host, _, path = target.removeprefix("http://").partition("/")
    host, _, port = scheme_host.rpartition(":") if ":" in scheme_host else (scheme_host, "", "80")
    upstream = proxy.connect(host, int(port))
    lines = head.split(b"\r\n")
    lines[0] = f"{method} /{path} {version}".encode()
    kept = [line for line in lines if not line.lower().startswith(b"proxy-")]
    with upstream:
        upstream.sendall(b"\r\n".join(kept) + b"\r\n\r\n" + rest)
        _pipe(client, upstream)


def _exactly(client: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = client.recv(size - len(data))
        if not chunk:
            raise OSError("closed mid-handshake")
        data += chunk
    return data


def _socks5_proxy(proxy: Proxy, client: socket.socket) -> None:
    version, methods = _exactly(client, 2)
    _exactly(client, methods)
    if version != 5:
        return
    client.sendall(b"\x05\x00")  # no authentication
    _, command, _, kind = _exactly(client, 4)
    if kind == 1:
        host = socket.inet_ntoa(_exactly(client, 4))
    elif kind == 3:
        host = _exactly(client, _exactly(client, 1)[0]).decode()
    else:
        host = socket.inet_ntop(socket.AF_INET6, _exactly(client, 16))
    (port,) = struct.unpack("!H", _exactly(client, 2))
    if command != 1:
        client.sendall(b"\x05\x07\x00\x01" + bytes(6))
        return
    try:
        upstream = proxy.connect(host, port)
    except OSError:
        client.sendall(b"\x05\x04\x00\x01" + bytes(6))  # host unreachable
        return
    client.sendall(b"\x05\x00\x00\x01" + bytes(4) + b"\x00\x00")
    with upstream:
        _pipe(client, upstream)


@contextlib.contextmanager
def _serving(scheme: str, hosts: dict[str, int], handle: Callable[[Proxy, socket.socket], None],
             tls: ssl.SSLContext | None = None) -> Iterator[Proxy]:  # fmt: skip
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    proxy = Proxy(port=listener.getsockname()[1], scheme=scheme, hosts=hosts)
    if tls is not None:
        proxy.host = "localhost"  # the name its certificate was issued for
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def serve(client: socket.socket) -> None:
        with client, contextlib.suppress(OSError, ValueError):
            if tls is not None:
                with tls.wrap_socket(client, server_side=True) as wrapped:
                    handle(proxy, wrapped)
                return
            handle(proxy, client)

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(30)
            worker = threading.Thread(target=serve, args=(client,), daemon=True)
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield proxy
    finally:
        stop.set()
        acceptor.join()
        listener.close()
        for worker in workers:
            worker.join(timeout=10)


@contextlib.contextmanager
def http_proxy(
    hosts: dict[str, int] | None = None,
    tls: ssl.SSLContext | None = None,
    *,
    credentials: tuple[str, str] | None = None,
    refusal: int = 407,
) -> Iterator[Proxy]:
    """An HTTP proxy; with `tls`, an https:// one (TLS between the agent and the proxy); with
    `credentials`, one that answers `refusal` (407, or 401 as some do) to a request without them."""
    with _serving("https" if tls else "http", hosts or {}, _http_proxy, tls) as proxy:
        proxy.credentials = credentials
        proxy.refusal = refusal
        yield proxy


def socks5_proxy(
    hosts: dict[str, int] | None = None, scheme: str = "socks5"
) -> contextlib.AbstractContextManager[Proxy]:
    return _serving(scheme, hosts or {}, _socks5_proxy)
