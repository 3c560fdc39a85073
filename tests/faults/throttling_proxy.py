"""A reverse proxy on 127.0.0.1 between the agents and a real control plane, so "mid-download" is
a real moment: every request passes through unchanged, except that an artifact's body can be held
after its first bytes (`hold_after`) until the test lets it go (`release`) or cuts it (`cut`).

    with throttling_proxy(plane.base_url) as proxy:
        proxy.hold_after(1024)          # artifacts stop after 1 KiB …
        proxy.wait_until_held()         # … the daemon is now mid-download, for real
        proxy.release()                 # the rest flows (or `proxy.cut()`: the connection drops)

Every artifact request is recorded with its `Range` header and the bytes sent, so a test can see a
download resumed where it stopped. Plain `http.client` upstream, one connection per request.
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

__all__ = ["ArtifactRequest", "ThrottlingProxy", "throttling_proxy"]

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}
_CHUNK = 256
# A deadline for a failure, not a speed expectation.
_WAIT_SECONDS = 120.0


@dataclass
class ArtifactRequest:
    path: str
    range: str | None
    status: int = 0
    sent: int = 0


@dataclass
class _Controls:
    hold_after: int | None = None
    released: threading.Event = field(default_factory=threading.Event)
    cut: threading.Event = field(default_factory=threading.Event)
    held: threading.Event = field(default_factory=threading.Event)
    closing: threading.Event = field(default_factory=threading.Event)
    artifacts: list[ArtifactRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def do_PATCH(self) -> None:
        self._forward()

    def do_PUT(self) -> None:
        self._forward()

    def do_DELETE(self) -> None:
        self._forward()

    def _forward(self) -> None:
        self.close_connection = True
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        headers["Connection"] = "close"
        upstream = http.client.HTTPConnection(self.server.upstream_host, self.server.upstream_port)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
        except OSError:
            # The control plane is down: the agent sees the connection drop, as it would.
            upstream.close()
            return
        try:
            self._relay(answer)
        except OSError:
            pass  # the agent went away (killed): nothing to tell it
        finally:
            upstream.close()

    def _relay(self, answer: http.client.HTTPResponse) -> None:
        self.send_response_only(answer.status, answer.reason)
        for name, value in answer.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("Connection", "close")
        self.end_headers()
        controls = self.server.controls
        record: ArtifactRequest | None = None
        if self.path.split("?")[0].endswith("/artifact"):
            record = ArtifactRequest(
                path=self.path, range=self.headers.get("Range"), status=answer.status
            )
            with controls.lock:
                controls.artifacts.append(record)
        while chunk := answer.read(_CHUNK):
            if record is not None:
                limit = controls.hold_after
                if limit is not None and record.sent + len(chunk) > limit:
                    cut_at = max(0, limit - record.sent)
                    self._send(chunk[:cut_at], record)
                    controls.held.set()
                    while not (controls.released.is_set() or controls.cut.is_set()):
                        if controls.closing.wait(0.05):
                            return
                    if controls.cut.is_set():
                        return  # the connection drops mid-body
                    self._send(chunk[cut_at:] + answer.read(), record)
                    return
            self._send(chunk, record)

    def _send(self, chunk: bytes, record: ArtifactRequest | None) -> None:
        self.wfile.write(chunk)
        self.wfile.flush()
        if record is not None:
            record.sent += len(chunk)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, upstream: str) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        parts = urlsplit(upstream)
        assert parts.hostname is not None and parts.port is not None
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port
        self.controls = _Controls()


@dataclass(kw_only=True)
class ThrottlingProxy:
    _server: _Server

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def point_at(self, upstream: str) -> None:
        """Forward to another control plane from now on (a restarted one, on a new port)."""
        parts = urlsplit(upstream)
        assert parts.hostname is not None and parts.port is not None
        self._server.upstream_host = parts.hostname
        self._server.upstream_port = parts.port

    def hold_after(self, size: int) -> None:
        """Artifact bodies stop after `size` bytes until `release` or `cut`."""
        controls = self._server.controls
        controls.released.clear()
        controls.cut.clear()
        controls.held.clear()
        controls.hold_after = size

    def wait_until_held(self) -> ArtifactRequest:
        """Block until a download is held mid-body; the request held."""
        if not self._server.controls.held.wait(_WAIT_SECONDS):
            raise AssertionError("no artifact download reached the hold")
        return self.artifacts()[-1]

    def release(self) -> None:
        self._server.controls.hold_after = None
        self._server.controls.released.set()

    def cut(self) -> None:
        self._server.controls.hold_after = None
        self._server.controls.cut.set()

    def artifacts(self) -> list[ArtifactRequest]:
        with self._server.controls.lock:
            return list(self._server.controls.artifacts)


@contextmanager
def throttling_proxy(upstream: str) -> Iterator[ThrottlingProxy]:
    server = _Server(upstream)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield ThrottlingProxy(_server=server)
    finally:
        server.controls.closing.set()
        server.shutdown()
        server.server_close()
        thread.join()
