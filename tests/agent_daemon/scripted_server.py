"""A loopback HTTP server that answers each connection with a script of raw bytes: the answers no
well-behaved server library would send (absurd headers, a head that never ends, a body that is not
what its headers claim). The artifact server in `updater_support` serves the well-formed cases."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

Script = Callable[[socket.socket, "ScriptedServer"], None]


@dataclass(kw_only=True)
class ScriptedServer:
    listener: socket.socket
    scripts: list[Script] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    # Over TLS with this context (the certificate's name is the caller's to map), else plain.
    tls: ssl.SSLContext | None = None

    @property
    def origin(self) -> str:
        host, port = self.listener.getsockname()[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    def url(self, path: str = "/artifact") -> str:
        return self.origin + path

    def serve_forever(self) -> None:
        self.listener.settimeout(0.05)
        while not self.stop.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, accepted: socket.socket) -> None:
        with accepted, suppress(OSError):
            if self.tls is None:
                self._script(accepted)
                return
            with self.tls.wrap_socket(accepted, server_side=True) as wrapped:
                self._script(wrapped)

    def _script(self, connection: socket.socket) -> None:
        head = read_request_head(connection)
        if head is None:
            return
        self.requests.append(head)
        script = self.scripts.pop(0) if self.scripts else not_found
        script(connection, self)


def read_request_head(connection: socket.socket) -> bytes | None:
    """The next request's head on `connection`, or None when the client closed it first."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = connection.recv(4096)
        if not chunk:
            return None
        head += chunk
    return head


def not_found(connection: socket.socket, server: ScriptedServer) -> None:
    connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def raw(answer: bytes) -> Script:
    def send(connection: socket.socket, server: ScriptedServer) -> None:
        connection.sendall(answer)

    return send


def head_then(head: bytes, body: bytes) -> Script:
    return raw(head + b"\r\n" + body)


def head_never_ends(interval: float = 0.1) -> Script:
    """A status line, then one header byte per `interval` until the server stops: every single
    read is fast, the head never completes."""

    def send(connection: socket.socket, server: ScriptedServer) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        while not server.stop.is_set():
            connection.sendall(b"a")
            server.stop.wait(interval)

    return send


def head_drips(interval: float = 0.05, lasting: float = 15.0) -> Script:
    """The status line and the headers one byte per `interval` — every single read is fast —
    with a header that never ends, until `lasting` seconds have passed (then the connection is
    closed: a client without a bound over the whole head would have waited all that time)."""

    def send(connection: socket.socket, server: ScriptedServer) -> None:
        ends = time.monotonic() + lasting
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Slow: "
        sent = 0
        while not server.stop.is_set() and time.monotonic() < ends:
            connection.sendall(head[sent : sent + 1] or b"a")
            sent += 1
            server.stop.wait(interval)

    return send


def answers_then(body: bytes, then: Script) -> Script:
    """A 200 with `body` on a connection kept open; the next request on that same connection (if
    the client sends one there) is answered by `then`."""

    def send(connection: socket.socket, server: ScriptedServer) -> None:
        connection.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        connection.settimeout(5)
        head = read_request_head(connection)
        if head is not None:
            server.requests.append(head)
            then(connection, server)

    return send


@contextmanager
def scripted_server(
    *scripts: Script, tls: ssl.SSLContext | None = None
) -> Iterator[ScriptedServer]:
    listener = socket.create_server(("127.0.0.1", 0))
    server = ScriptedServer(listener=listener, scripts=list(scripts), tls=tls)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop.set()
        thread.join()
        listener.close()
