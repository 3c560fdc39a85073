"""A real HTTP server on 127.0.0.1 serving artifacts the way the control plane does (Range,
If-Range, ETag = quoted sha256) — and, on request, the ways a hostile or broken server does not.

    with artifact_server() as server:
        url = server.serve("/v1/agent/runs/r1/artifact", body, behaviour="cut_once", cut_after=500)
        server.requests("/v1/agent/runs/r1/artifact")     # the headers of every request

The updater's tests use the behaviours; the demo installs its first version from it, and the
download benchmark measures the updater against it.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

__all__ = ["ArtifactServer", "Behaviour", "artifact_server"]

Behaviour = Literal[
    "normal",  # 200 / 206 with Range and If-Range honoured
    "ignore_range",  # always the whole body with 200
    "cut_once",  # the first request stops after `cut_after` bytes, later ones are normal
    "overlong_announced",  # extra bytes beyond the artifact, announced in Content-Length
    "overlong_streamed",  # extra bytes beyond the artifact, no Content-Length (close-delimited)
    "trickle",  # one byte every `trickle_interval` seconds
    "stall",  # headers, then silence
    "wrong_range",  # answers a Range request with 206 for a range starting elsewhere
    "refuse",  # an error answer in the contract's words: `status` with {"detail": {"code"}}
]


@dataclass(kw_only=True)
class Served:
    body: bytes
    behaviour: Behaviour = "normal"
    cut_after: int = 0
    trickle_interval: float = 0.05
    status: int = 200
    code: str = ""
    requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def etag(self) -> str:
        return f'"{hashlib.sha256(self.body).hexdigest()}"'


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        served = self.server.files.get(self.path)
        if served is None:
            self.send_error(404)
            return
        served.requests.append({k.lower(): v for k, v in self.headers.items()})
        with suppress(BrokenPipeError, ConnectionResetError):
            self._serve(served, first=len(served.requests) == 1)

    def _serve(self, served: Served, *, first: bool) -> None:
        if served.behaviour == "refuse":
            answer = json.dumps({"detail": {"code": served.code, "message": served.code}})
            self.send_response(served.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer.encode())
            return
        body = served.body
        start = 0
        range_header = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        honour = served.behaviour != "ignore_range"
        if range_header and honour and (if_range is None or if_range == served.etag):
            start = int(range_header.removeprefix("bytes=").split("-")[0])
        if served.behaviour == "wrong_range" and start:
            start += 1
        payload = body[start:]
        if served.behaviour in ("overlong_announced", "overlong_streamed"):
            payload += b"X" * 4096
        self.send_response(206 if start else 200)
        self.send_header("ETag", served.etag)
        self.send_header("Accept-Ranges", "bytes")
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        if served.behaviour == "overlong_streamed":
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if served.behaviour == "stall":
            self.server.stop_event.wait(30)
            return
        if served.behaviour == "trickle":
            for index in range(len(payload)):
                if self.server.stop_event.is_set():
                    return
                self.wfile.write(payload[index : index + 1])
                self.wfile.flush()
                time.sleep(served.trickle_interval)
            return
        if served.behaviour == "cut_once" and first:
            self.wfile.write(payload[: served.cut_after])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.files: dict[str, Served] = {}
        self.stop_event = threading.Event()


@dataclass(kw_only=True)
class ArtifactServer:
    _server: _Server

    def serve(
        self,
        path: str,
        body: bytes,
        *,
        behaviour: Behaviour = "normal",
        cut_after: int = 0,
        trickle_interval: float = 0.05,
    ) -> str:
        """Serve `body` at `path`; returns its URL."""
        self._server.files[path] = Served(
            body=body, behaviour=behaviour, cut_after=cut_after, trickle_interval=trickle_interval
        )
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{path}"

    def refuse(self, path: str, *, status: int, code: str) -> str:
        """Answer every request for `path` with `status` and the contract's error `code` (a 403
        `token_revoked`, a 503 `database_unavailable`), keeping the requests seen so far."""
        seen = self._server.files[path].requests if path in self._server.files else []
        self._server.files[path] = Served(
            body=b"", behaviour="refuse", status=status, code=code, requests=seen
        )
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}{path}"

    def requests(self, path: str) -> list[dict[str, str]]:
        return self._server.files[path].requests


@contextmanager
def artifact_server() -> Iterator[ArtifactServer]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield ArtifactServer(_server=server)
    finally:
        server.stop_event.set()
        server.shutdown()
        server.server_close()
        thread.join()
