"""A stand-in control plane on loopback (plain http) for `agent install`: it answers the
enrollment exchange (`POST ENROLL_PATH`) and the config poll in the contract's shapes, keeps its
tokens' uses, and records every request. A unit seam: the real exchange is the control plane's
own (`tests/agent_daemon/end_to_end/test_install_end_to_end.py`)."""

from __future__ import annotations

import contextlib
import fnmatch
import secrets
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pydantic import ValidationError

from ground.contract import (
    CONFIG_PATH,
    ENROLL_PATH,
    AgentConfig,
    AnswerCode,
    BrakeView,
    EnrolledAgent,
    EnrollRequest,
    ErrorAnswer,
    ErrorDetail,
    ScheduleView,
)

ORG_ID = uuid.UUID("6f1c0000-0000-4000-8000-000000000002")


@dataclass
class StandInToken:
    uses: int = 1
    used: int = 0
    expired: bool = False
    revoked: bool = False
    name_pattern: str | None = None


@dataclass
class StandInPlane:
    port: int
    tokens: dict[str, StandInToken] = field(default_factory=dict)
    # credential → (agent id, name)
    agents: dict[str, tuple[uuid.UUID, str]] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def token(self, **options: Any) -> str:
        secret = f"nwe_{secrets.token_urlsafe(24)}"
        self.tokens[secret] = StandInToken(**options)
        return secret

    def exchanges(self) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"] == ENROLL_PATH]


def _refusal(code: AnswerCode, message: str) -> bytes:
    return ErrorAnswer(detail=ErrorDetail(code=code, message=message)).model_dump_json().encode()


def _handler(plane: StandInPlane) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _bearer(self) -> str:
            return self.headers.get("Authorization", "").removeprefix("Bearer ")

        def do_GET(self) -> None:
            plane.requests.append({"path": self.path.split("?")[0], "headers": dict(self.headers)})
            known = plane.agents.get(self._bearer())
            if not self.path.startswith(CONFIG_PATH) or known is None:
                self._answer(401, _refusal(AnswerCode.INVALID_REQUEST, "unknown credential"))
                return
            agent_id, name = known
            config = AgentConfig(
                agent_id=agent_id,
                org_id=ORG_ID,
                name=name,
                schedule=ScheduleView(enabled=True, times=["03:00"]),
                timezone="Europe/Amsterdam",
                catch_up_minutes=15,
                brake=BrakeView(engaged=False, reason=None),
            )
            self._answer(200, config.model_dump_json().encode())

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            plane.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            if self.path != ENROLL_PATH:
                self.send_error(404)
                return
            with lock:
                status, answer = self._exchange(body)
            self._answer(status, answer)

        def _exchange(self, body: bytes) -> tuple[int, bytes]:
            token = plane.tokens.get(self._bearer())
            # Worded as the control plane words them; two without words, as an older one may.
            if token is None or token.revoked:
                return 401, _refusal(AnswerCode.ENROLLMENT_TOKEN_REFUSED, "")
            if token.expired:
                return 401, _refusal(
                    AnswerCode.ENROLLMENT_TOKEN_EXPIRED,
                    "the enrollment token expired at 2026-12-03T01:00:00Z: ask for a new one",
                )
            if token.used >= token.uses:
                return 401, _refusal(
                    AnswerCode.ENROLLMENT_TOKEN_USED_UP,
                    f"the enrollment token has no use left (all {token.uses} were used): ask "
                    "for a new one",
                )
            try:
                request = EnrollRequest.model_validate_json(body)
            except ValidationError as exc:
                return 422, _refusal(AnswerCode.INVALID_REQUEST, str(exc)[:200])
            if token.name_pattern and not fnmatch.fnmatchcase(request.name, token.name_pattern):
                return 422, _refusal(
                    AnswerCode.AGENT_NAME_NOT_ALLOWED,
                    f"name: found {request.name!r} — does not match the token's name pattern "
                    f"{token.name_pattern!r}\n(give a name that does with --name)",
                )
            if any(name == request.name for _, name in plane.agents.values()):
                return 409, _refusal(AnswerCode.AGENT_EXISTS, "")
            token.used += 1
            credential = f"nwa_{secrets.token_urlsafe(24)}"
            agent_id = uuid.uuid4()
            plane.agents[credential] = (agent_id, request.name)
            enrolled = EnrolledAgent(
                agent_id=agent_id, org_id=ORG_ID, name=request.name, credential=credential
            )
            return int(HTTPStatus.CREATED), enrolled.model_dump_json().encode()

    return Handler


@contextlib.contextmanager
def stand_in_plane() -> Iterator[StandInPlane]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    plane = StandInPlane(port=server.server_address[1])
    server.RequestHandlerClass = _handler(plane)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield plane
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
