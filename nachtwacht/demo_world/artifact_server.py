"""A real HTTP server on 127.0.0.1 serving artifacts the way the control plane does: Range,
If-Range, ETag = quoted sha256.

    with artifact_server() as server:
        url = server.serve("/old.tar.gz", body)
        server.requests("/old.tar.gz")              # the headers of every request

The demo installs its first version from it. `ArtifactHandler` serves in steps (where a body
starts, what it holds, its headers, how it is written) so that a server that misbehaves on
purpose changes one step and keeps the rest.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = [
    "ArtifactHTTPServer",
    "ArtifactHandler",
    "ArtifactServer",
    "Served",
    "artifact_server",
    "running",
]


@dataclass(kw_only=True)
class Served:
    body: bytes
    requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def etag(self) -> str:
        return f'"{hashlib.sha256(self.body).hexdigest()}"'


class ArtifactHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.files: dict[str, Served] = {}
        self.stop_event = threading.Event()

    def url(self, path: str) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}{path}"


class ArtifactHandler(BaseHTTPRequestHandler):
    server: ArtifactHTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        served = self.server.files.get(self.path)
        if served is None:
            self.send_error(404)
            return
        served.requests.append({k.lower(): v for k, v in self.headers.items()})
        with suppress(BrokenPipeError, ConnectionResetError):
            self.serve(served, first=len(served.requests) == 1)

    def serve(self, served: Served, *, first: bool) -> None:
        start = self.range_start(served)
        payload = self.payload(served, start)
        self.send_response(206 if start else 200)
        self.send_header("ETag", served.etag)
        self.send_header("Accept-Ranges", "bytes")
        if start:
            size = len(served.body)
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.length_header(served, payload)
        self.end_headers()
        self.write_body(served, payload, first=first)

    def range_start(self, served: Served) -> int:
        """Where the answer starts: a Range request's first byte when its If-Range (if any) is
        the current ETag, else 0 (the whole body)."""
        range_header = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if range_header and (if_range is None or if_range == served.etag):
            return int(range_header.removeprefix("bytes=").split("-")[0])
        return 0

    def payload(self, served: Served, start: int) -> bytes:
        return served.body[start:]

    def length_header(self, served: Served, payload: bytes) -> None:
        del served
        self.send_header("Content-Length", str(len(payload)))

    def write_body(self, served: Served, payload: bytes, *, first: bool) -> None:
        del served, first
        self.wfile.write(payload)


@dataclass(kw_only=True)
class ArtifactServer:
    _server: ArtifactHTTPServer

    def serve(self, path: str, body: bytes) -> str:
        """Serve `body` at `path`; returns its URL."""
        self._server.files[path] = Served(body=body)
        return self._server.url(path)

    def requests(self, path: str) -> list[dict[str, str]]:
        return self._server.files[path].requests


@contextmanager
def running(server: ArtifactHTTPServer) -> Iterator[ArtifactHTTPServer]:
    """`server` answering on a thread of its own until the block ends."""
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop_event.set()
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def artifact_server() -> Iterator[ArtifactServer]:
    server: ArtifactHTTPServer = ArtifactHTTPServer(ArtifactHandler)
    with running(server):
        yield ArtifactServer(_server=server)
