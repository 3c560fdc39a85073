"""Debian's tinyproxy on a loopback port, as a host's forward proxy: started and stopped on the
same port, with a filter that denies hosts or with every request sent to an upstream proxy (one
that is not there makes it answer 502)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["TinyProxy", "tinyproxy_path"]


def tinyproxy_path() -> str | None:
    return shutil.which("tinyproxy")


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
        return port


class TinyProxy:
    """One tinyproxy process at a time on `port`. Its files live in a directory of their own that
    its unprivileged user can read (the test's tmp_path is the test user's only)."""

    def __init__(self) -> None:
        self.port = _free_port()
        self._dir = Path(tempfile.mkdtemp(prefix="tinyproxy-"))
        self._dir.chmod(0o755)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        path = self._dir / "tinyproxy.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, *, deny: tuple[str, ...] = (), upstream: str | None = None) -> None:
        """Listen, denying the host names matching `deny` (tinyproxy's 403 "Filtered" page), or
        sending every request to the HTTP proxy `upstream` (host:port)."""
        self.stop()
        lines = [
            f"Port {self.port}",
            "Listen 127.0.0.1",
            "Timeout 30",
            "MaxClients 20",
            "Allow 127.0.0.1",
            'DefaultErrorFile "/usr/share/tinyproxy/default.html"',
            "LogLevel Info",
        ]
        if Path("/etc/passwd").read_text().count("\ntinyproxy:"):
            lines += ["User tinyproxy", "Group tinyproxy"]
        if deny:
            filter_file = self._dir / "filter"
            filter_file.write_text("".join(f"{pattern}\n" for pattern in deny))
            filter_file.chmod(0o644)
            lines += [f'Filter "{filter_file}"', "FilterDefaultDeny No"]
        if upstream is not None:
            lines.append(f"upstream http {upstream}")
        config = self._dir / "tinyproxy.conf"
        config.write_text("\n".join(lines) + "\n")
        config.chmod(0o644)
        binary = tinyproxy_path()
        assert binary is not None
        with (self._dir / "tinyproxy.log").open("ab") as log:
            self._process = subprocess.Popen(
                [binary, "-d", "-c", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            assert self._process.poll() is None, f"tinyproxy exited: {self.log}"
            assert time.monotonic() < deadline, f"tinyproxy does not listen: {self.log}"
            time.sleep(0.05)

    def stop(self) -> None:
        """Close its port: the host's proxy is down."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._dir, ignore_errors=True)
