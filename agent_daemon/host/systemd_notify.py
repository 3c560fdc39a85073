"""systemd's notify protocol (`Type=notify`, `WatchdogSec=`) without a dependency: one datagram.

`READY=1` once the daemon is ready, `STATUS=` whenever what it is doing changes, `WATCHDOG=1`
at most every half of the interval systemd asks for — and only while the daemon's minutes complete
(`daemon_loop` asks `Activity.alive()`) — and `STOPPING=1` on the way out. Outside systemd
(`NOTIFY_SOCKET` unset) every call does nothing.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

__all__ = ["Notifier"]


class Notifier:
    def __init__(self, environ: Mapping[str, str]) -> None:
        address = environ.get("NOTIFY_SOCKET", "")
        # A leading "@" names a socket in the abstract namespace.
        self._address = "\0" + address[1:] if address.startswith("@") else address
        usec = environ.get("WATCHDOG_USEC", "")
        self.watchdog_interval: float | None = (
            int(usec) / 2_000_000 if usec.isdigit() and int(usec) > 0 else None
        )

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def notify(self, message: str) -> bool:
        """Send `message`; False when there is no socket or systemd is not listening."""
        if not self._address:
            return False
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(self._address)
                sock.sendall(message.encode())
        except OSError:
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.notify(f"READY=1\nSTATUS={status}")

    def status(self, text: str) -> bool:
        # One line: systemd shows STATUS= in `systemctl status`, and a newline would end it.
        return self.notify("STATUS=" + " ".join(text.split()))

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")
