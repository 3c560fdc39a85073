"""One deadline over a download's whole exchange — connect, response head and body — not only the
gaps between body chunks (`Watchdog`).
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from types import TracebackType
from typing import Any

__all__ = ["Watchdog"]


class Watchdog:
    """One deadline over the whole exchange. httpx times each socket operation on its own, so a
    server that sends its head one byte per read timeout is never cut off by them; at the deadline
    this shuts down every socket the request connected (learned from httpcore's trace events),
    which wakes a read blocked in any phase with an end of stream."""

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

    def trace(self, event: str, info: dict[str, Any]) -> None:
        # "connection.…" directly or through an HTTP proxy, "socks_proxy.…" through a SOCKS one.
        if not event.endswith("connect_tcp.complete"):
            return
        stream = info.get("return_value")
        try:
            connected = stream.get_extra_info("socket") if stream is not None else None
        except Exception:  # a backend without sockets: nothing to watch
            connected = None
        if isinstance(connected, socket.socket):
            with self._lock:
                self._sockets.append(connected)
                if self.expired:
                    _shut(connected)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for connected in self._sockets:
                _shut(connected)


def _shut(connected: socket.socket) -> None:
    with suppress(OSError):  # already closed
        connected.shutdown(socket.SHUT_RDWR)
