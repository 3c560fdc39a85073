"""A control plane on loopback, over TLS (or plain http), that answers the config poll and serves
one artifact; it records every request it answered and every handshake it refused. And a web
server that is no control plane (`web_server`): one answer, a page or nothing, to every request."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ground.contract import (
    CONFIG_PATH,
    SERVER_TIME_HEADER,
    AgentConfig,
    BrakeView,
    ScheduleView,
    format_instant,
)
from tests.agent_daemon.network_support.pki import Pki

AGENT_ID = uuid.UUID("4b1c9a6e-0000-4000-8000-000000000001")
ARTIFACT_PATH = "/v1/agent/runs/run-1/artifact"


def config_document() -> bytes:
    return (
        AgentConfig(
            agent_id=AGENT_ID,
            org_id=uuid.UUID("6f1c0000-0000-4000-8000-000000000001"),
            name="web-01",
            schedule=ScheduleView(enabled=True, times=["03:00"]),
            timezone="Europe/Amsterdam",
            catch_up_minutes=15,
            brake=BrakeView(engaged=False, reason=None),
            release=None,
            manual_update=None,
        )
        .model_dump_json()
        .encode()
    )


@dataclass
class ControlPlane:
    port: int
    tls: bool
    artifact: bytes = b""
    requests: list[dict[str, Any]] = field(default_factory=list)
    refused_handshakes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://localhost:{self.port}"

    def url_for(self, host: str) -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"


def _handler(plane: ControlPlane) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # one request per connection: nothing left half-read

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            plane.requests.append({"path": self.path, "headers": dict(self.headers)})
            if self.path.startswith(CONFIG_PATH):
                body, kind = config_document(), "application/json"
            elif self.path == ARTIFACT_PATH:
                body, kind = plane.artifact, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header(SERVER_TIME_HEADER, format_instant(datetime.now(UTC)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def _drain(raw: socket.socket) -> None:
    # After a refused handshake: read what the client still sends until it hangs up, so closing
    # does not reset the connection before the client has read the TLS alert.
    raw.settimeout(5)
    with contextlib.suppress(OSError):
        while raw.recv(65536):
            pass


def _serve_one(
    raw: socket.socket, address: Any, plane: ControlPlane, context: ssl.SSLContext | None
) -> None:
    connection: socket.socket = raw
    try:
        if context is not None:
            connection = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
            try:
                connection.do_handshake()
            except (ssl.SSLError, OSError) as exc:
                plane.refused_handshakes.append(getattr(exc, "reason", None) or str(exc))
                _drain(raw)
                return
        _handler(plane)(connection, address, None)  # type: ignore[arg-type]
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            connection.close()


@contextlib.contextmanager
def control_plane(
    pki: Pki | None, *, require_client_cert: bool = False, artifact: bytes = b""
) -> Iterator[ControlPlane]:
    """Over TLS with the PKI's server certificate, or plain http when `pki` is None."""
    context: ssl.SSLContext | None = None
    if pki is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.server_cert, pki.server_key)
        if require_client_cert:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=pki.ca)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    plane = ControlPlane(port=listener.getsockname()[1], tls=pki is not None, artifact=artifact)
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                raw, address = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            raw.settimeout(10)
            worker = threading.Thread(
                target=_serve_one, args=(raw, address, plane, context), daemon=True
            )
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield plane
    finally:
        stop.set()
        acceptor.join()
        listener.close()
        for worker in workers:
            worker.join(timeout=10)


@dataclass
class WebServer:
    """A plain-http server on loopback that is no control plane: every request gets one answer."""

    port: int
    paths: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://localhost:{self.port}"


@contextlib.contextmanager
def web_server(
    status: int, body: bytes, *, content_type: str = "text/html", reason: str | None = None
) -> Iterator[WebServer]:
    """Answers `status` with `body` to every request, as a web server at the wrong URL does;
    `reason` is its status line's phrase when it is not the standard one (`403 Filtered`)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    found = WebServer(port=server.server_address[1])

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            found.paths.append(self.path)
            self.send_response(status, reason)
            if body:
                self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = do_DELETE = _answer

    server.RequestHandlerClass = Handler
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield found
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
