"""The demo's artifact server (`nachtwacht.demo_world.artifact_server`), and on request the ways a
hostile or broken server answers instead.

    with artifact_server() as server:
        url = server.serve("/v1/agent/runs/r1/artifact", body, behaviour="cut_once", cut_after=500)
        server.requests("/v1/agent/runs/r1/artifact")     # the headers of every request

The updater's tests use the behaviours; the download benchmark measures the updater against it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from nachtwacht.demo_world.artifact_server import (
    ArtifactHandler,
    ArtifactHTTPServer,
    Served,
    running,
)

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
class Misbehaving(Served):
    behaviour: Behaviour = "normal"
    cut_after: int = 0
    trickle_interval: float = 0.05
    status: int = 200
    code: str = ""


def _misbehaving(served: Served) -> Misbehaving:
    assert isinstance(served, Misbehaving)
    return served


class _Handler(ArtifactHandler):
    def serve(self, served: Served, *, first: bool) -> None:
        hostile = _misbehaving(served)
        if hostile.behaviour != "refuse":
            super().serve(served, first=first)
            return
        answer = json.dumps({"detail": {"code": hostile.code, "message": hostile.code}})
        self.send_response(hostile.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer.encode())

    def range_start(self, served: Served) -> int:
        behaviour = _misbehaving(served).behaviour
        if behaviour == "ignore_range":
            return 0
        start = super().range_start(served)
        return start + 1 if behaviour == "wrong_range" and start else start

    def payload(self, served: Served, start: int) -> bytes:
        payload = super().payload(served, start)
        if _misbehaving(served).behaviour in ("overlong_announced", "overlong_streamed"):
            payload += b"X" * 4096
        return payload

    def length_header(self, served: Served, payload: bytes) -> None:
        if _misbehaving(served).behaviour == "overlong_streamed":
            self.send_header("Connection", "close")
            self.close_connection = True
        else:
            super().length_header(served, payload)

    def write_body(self, served: Served, payload: bytes, *, first: bool) -> None:
        hostile = _misbehaving(served)
        if hostile.behaviour == "stall":
            self.server.stop_event.wait(30)
        elif hostile.behaviour == "trickle":
            for index in range(len(payload)):
                if self.server.stop_event.is_set():
                    return
                self.wfile.write(payload[index : index + 1])
                self.wfile.flush()
                # The trickle is the behaviour under test: a byte, then a pause.
                time.sleep(hostile.trickle_interval)
        elif hostile.behaviour == "cut_once" and first:
            self.wfile.write(payload[: hostile.cut_after])
            self.wfile.flush()
            self.close_connection = True
        else:
            super().write_body(served, payload, first=first)


@dataclass(kw_only=True)
class ArtifactServer:
    _server: ArtifactHTTPServer

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
        self._server.files[path] = Misbehaving(
            body=body, behaviour=behaviour, cut_after=cut_after, trickle_interval=trickle_interval
        )
        return self._server.url(path)

    def refuse(self, path: str, *, status: int, code: str) -> str:
        """Answer every request for `path` with `status` and the contract's error `code` (a 403
        `token_revoked`, a 503 `database_unavailable`), keeping the requests seen so far."""
        seen = self._server.files[path].requests if path in self._server.files else []
        self._server.files[path] = Misbehaving(
            body=b"", behaviour="refuse", status=status, code=code, requests=seen
        )
        return self._server.url(path)

    def requests(self, path: str) -> list[dict[str, str]]:
        return self._server.files[path].requests


@contextmanager
def artifact_server() -> Iterator[ArtifactServer]:
    with running(ArtifactHTTPServer(_Handler)) as server:
        yield ArtifactServer(_server=server)
