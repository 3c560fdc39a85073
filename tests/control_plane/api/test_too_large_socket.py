"""An API client over the body limit that sends its whole body before it reads the answer (most
HTTP libraries do, and none asks `Expect: 100-continue` for a small JSON body): it must get the
JSON 413, never a connection reset because the replica closed with the body still unread."""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

from control_plane.api.limits import MAX_BODY_BYTES
from tests.control_plane.conftest import Api

PADDING = b"x" * (MAX_BODY_BYTES * 4)


def _send_all_then_read(base_url: str, head: str, body: bytes) -> bytes:
    address = urlsplit(base_url)
    with socket.create_connection((address.hostname, address.port), timeout=20) as sock:
        sock.sendall(head.format(host=address.netloc).encode("ascii") + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def _json_413(answer: bytes) -> dict[str, object]:
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"application/json" in head.lower()
    assert b"connection: close" in head.lower()
    detail = json.loads(body)["detail"]
    assert isinstance(detail, dict)
    return detail


def test_a_declared_body_over_the_limit_sent_whole_gets_the_json_413(api: Api) -> None:
    body = b'{"slot_key": "' + PADDING + b'"}'
    head = (
        "POST /v1/agent/claims HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    for _ in range(5):  # a reset is a race: it must not happen once
        detail = _json_413(_send_all_then_read(api.base_url, head, body))
        assert detail["code"] == "request_too_large"
        assert f"larger than {MAX_BODY_BYTES} bytes" in str(detail["message"])


def test_a_chunked_body_over_the_limit_sent_whole_gets_the_json_413(api: Api) -> None:
    chunks = b"".join(
        f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in [PADDING[:65536]] * 4
    )
    head = (
        "PUT /v1/admin/settings HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    for _ in range(5):
        detail = _json_413(_send_all_then_read(api.base_url, head, chunks + b"0\r\n\r\n"))
        assert detail["code"] == "request_too_large"
