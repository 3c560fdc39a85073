"""A tiny real HTTP server on loopback that serves trust roots as the control plane does
(`trust_root_path(N)` → the exact bytes, 404 until published) and a config naming the newest, and
records each request's path and headers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from ground.contract import CONFIG_PATH, TRUST_ROOTS_PATH, AgentConfig

__all__ = ["RootServer", "root_server"]


@dataclass
class RootServer:
    config: AgentConfig
    roots: dict[int, bytes] = field(default_factory=dict)
    # Versions answered with this status instead (e.g. 503: the platform is down).
    failing: dict[int, int] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    base_url: str = ""

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.path, dict(self.headers.items())))
                path = self.path.split("?", 1)[0]
                if path == CONFIG_PATH:
                    announced = max(server.roots, default=None)
                    config = server.config.model_copy(update={"trust_root_version": announced})
                    self._send(200, json.dumps(config.model_dump(mode="json")).encode())
                    return
                prefix = f"{TRUST_ROOTS_PATH}/"
                version = int(path.removeprefix(prefix)) if path.startswith(prefix) else -1
                if version in server.failing:
                    body = b'{"detail": {"code": "database_unavailable", "message": "down"}}'
                    self._send(server.failing[version], body)
                elif version in server.roots:
                    self._send(200, server.roots[version])
                else:
                    self._send(404, b'{"detail": "not found"}')

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@contextmanager
def root_server(config: AgentConfig) -> Iterator[RootServer]:
    served = RootServer(config=config)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), served.handler())
    served.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()
