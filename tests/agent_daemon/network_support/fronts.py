"""A front on loopback for a real control plane: it forwards every connection to the plane's plain
port, over TLS with a test CA's certificate (`tls=True`) or as it came, and counts the config
polls that pass through it, so a test can wait for the daemon's minutes instead of sleeping."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ground.contract import CONFIG_PATH
from tests.agent_daemon.network_support.pki import make_pki

__all__ = ["Front", "control_plane_front"]

_CONFIG_REQUEST = f"GET {CONFIG_PATH}".encode()


@dataclass
class Front:
    """Where the agent connects (`url`), the CA that signed the front's certificate (None for
    plain http), and the config polls seen so far."""

    url: str
    ca_file: Path | None
    _polls: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def saw(self, data: bytes) -> None:
        # A request line is the first bytes of a request, which the client writes in one piece.
        found = data.count(_CONFIG_REQUEST)
        if found:
            with self._changed:
                self._polls += found
                self._changed.notify_all()

    @property
    def polls(self) -> int:
        with self._changed:
            return self._polls

    def wait_for_polls(self, count: int, *, timeout: float) -> int:
        """Block until `count` config polls have passed (or `timeout` real seconds); returns how
        many did."""
        with self._changed:
            self._changed.wait_for(lambda: self._polls >= count, timeout=timeout)
            return self._polls


def _forward(source: socket.socket, sink: socket.socket, front: Front | None = None) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            if front is not None:
                front.saw(data)
            sink.sendall(data)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)


@contextlib.contextmanager
def control_plane_front(plain_port: int, folder: Path, *, tls: bool) -> Iterator[Front]:
    """A front for the control plane listening on `plain_port`; with `tls`, its certificate (for
    `localhost`) is signed by a private CA made in `folder`."""
    context: ssl.SSLContext | None = None
    ca_file: Path | None = None
    if tls:
        pki = make_pki(folder)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        ca_file = pki.ca
    listener = socket.create_server(("127.0.0.1", 0))
    scheme = "https" if tls else "http"
    front = Front(url=f"{scheme}://localhost:{listener.getsockname()[1]}", ca_file=ca_file)

    def serve(raw: socket.socket) -> None:
        with contextlib.ExitStack() as stack:
            outer = raw
            with contextlib.suppress(OSError):
                if context is not None:
                    outer = stack.enter_context(context.wrap_socket(raw, server_side=True))
                else:
                    stack.enter_context(raw)
                inner = stack.enter_context(socket.create_connection(("127.0.0.1", plain_port)))
                back = threading.Thread(target=_forward, args=(inner, outer), daemon=True)
                back.start()
                _forward(outer, inner, front)
                back.join(timeout=30)

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                raw, _ = listener.accept()
                threading.Thread(target=serve, args=(raw,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield front
    finally:
        listener.close()
