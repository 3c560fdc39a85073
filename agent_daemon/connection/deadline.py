"""One deadline over a request's whole exchange — connect, response head and body — not only the
gaps between reads (`Watchdog`): every answer of the control plane (`control_plane_client`) and
the artifact's download (`agent_daemon.updater.download.fetch`) are bounded by it.

The watchdog sees only the sockets the request itself connects, so a bounded request must have a
connection of its own: it says `Connection: close` (`OWN_CONNECTION`), and the connection is
never handed to a later request.
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from types import TracebackType
from typing import Any

__all__ = ["OWN_CONNECTION", "Watchdog"]

# The header of a request the watchdog bounds: a connection an earlier answer left open was
# connected before this request's watchdog was there to see it.
OWN_CONNECTION = {"Connection": "close"}


class Watchdog:
    """One deadline over the whole exchange. httpx times each socket operation on its own, so a
    server that sends its head one byte per read timeout is never cut off by them; at the deadline
    this shuts down every socket the request connected (learned from httpcore's trace events),
    which wakes a read blocked in any phase with an end of stream.

    The watchdog keeps its own handle of each socket (`socket.dup`): TLS takes the connected
    socket object over (`wrap_socket` detaches it), so a shutdown through that object would reach
    nothing, while a shutdown through a duplicate ends the connection itself. The handles are
    closed when the exchange ends."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> Watchdog:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._timer.cancel()
        with self._lock:
            for handle in self._sockets:
                handle.close()
            self._sockets.clear()

    def trace(self, event: str, info: dict[str, Any]) -> None:
        # "connection.…" directly or through an HTTP proxy, "socks_proxy.…" through a SOCKS one.
        if not event.endswith("connect_tcp.complete"):
            return
        stream = info.get("return_value")
        try:
            connected = stream.get_extra_info("socket") if stream is not None else None
        except Exception:  # a backend without sockets: nothing to watch
            connected = None
        if not isinstance(connected, socket.socket):
            return
        try:
            handle = connected.dup()
        except OSError:  # closed already: nothing left to bound
            return
        with self._lock:
            self._sockets.append(handle)
            if self.expired:
                _shut(handle)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for handle in self._sockets:
                _shut(handle)


def _shut(handle: socket.socket) -> None:
    with suppress(OSError):  # the connection has ended already
        handle.shutdown(socket.SHUT_RDWR)
