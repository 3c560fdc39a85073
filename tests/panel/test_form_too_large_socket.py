"""A panel form over the request limit sent straight to a replica (no nginx in front), the way a
browser sends it: the whole body first, then the answer is read. The reader must get the panel's
413 page, never a connection reset because the replica closed with the body still unread."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import psycopg

from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

PASTED = b"x" * 300_000


def _post_like_a_browser(base_url: str, path: str, body: bytes, cookie: str = "") -> bytes:
    """Headers, then the whole body, then read the answer to the end (as a browser does: it does
    not read while it sends, and it does not ask `Expect: 100-continue`)."""
    address = urlsplit(base_url)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {address.netloc}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {len(body)}\r\nAccept-Language: nl\r\n"
        + (f"Cookie: {cookie}\r\n" if cookie else "")
        + "\r\n"
    ).encode("ascii")
    with socket.create_connection((address.hostname, address.port), timeout=20) as sock:
        sock.sendall(head + body)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_a_browser_sending_a_large_form_sees_the_page(panel_world: PanelWorld) -> None:
    body = b"csrf=x&email=anna%40example.com&password=" + PASTED
    for _ in range(5):  # a reset is a race: it must not happen once
        answer = _post_like_a_browser(panel_world.server.base_url, "/panel/sign-in/person", body)
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"Het formulier is niet verstuurd" in answer
        assert b"connection: close" in answer.lower()


def test_a_signed_in_browsers_large_hold_form_sees_the_page_and_nothing_changes(
    panel_world: PanelWorld,
) -> None:
    with sign_in_client(panel_world, panel_world.panel_key) as editor:
        agent = f"/panel/agents/{panel_world.agent_id}"
        csrf = csrf_of(editor.get(agent).text)
        cookie = "; ".join(f"{name}={value}" for name, value in editor.cookies.items())
    body = f"csrf={csrf}&until=2027-04-02&reason=".encode() + PASTED
    answer = _post_like_a_browser(panel_world.server.base_url, agent + "/hold", body, cookie)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    with psycopg.connect(panel_world.server.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM holds").fetchone() == (0,)


def test_a_body_past_what_is_read_is_answered_at_once(panel_world: PanelWorld) -> None:
    """A declared body larger than the replica reads for the page (10 MiB): the page comes without
    the replica waiting for the body, and the connection is closed."""
    address = urlsplit(panel_world.server.base_url)
    head = (
        f"POST /panel/sign-in/person HTTP/1.1\r\nHost: {address.netloc}\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        f"Content-Length: {10 * 1024 * 1024}\r\n\r\n"
    ).encode("ascii")
    with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
        sock.sendall(head + b"password=" + b"x" * 1000)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"The form was too large" in answer
