"""The seam under every panel route: a service's refusal that a route did not word itself is
answered with the panel's page in the reader's language (a unit test of `service_refused` on a
request as the app hands it over; the routes' own refusals are tested over HTTP)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import FastAPI
from starlette.requests import Request

from control_plane.errors import InvalidInput, NotFound
from control_plane.panel import mount_panel
from control_plane.panel.form_refusal import service_refused


def _request(path: str, method: str = "POST") -> Request:
    app = FastAPI()
    mount_panel(app)
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "root_path": "",
        "scheme": "http",
        "server": ("127.0.0.1", 8080),
        "query_string": b"",
        "headers": [(b"accept-language", b"nl"), (b"host", b"127.0.0.1:8080")],
        "state": {"now": datetime(2027, 3, 26, 11, tzinfo=UTC)},
        "app": app,
    }
    return Request(scope)


def test_a_refused_value_gets_the_form_refused_page() -> None:
    exc = InvalidInput("reason", "x\u202ey", "holds a bidirectional control")
    answer = service_refused(_request("/panel/sign-in/person"), exc)
    assert answer is not None
    assert answer.status_code == 422
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-language"] == "nl"
    body = bytes(answer.body).decode()
    assert "Reden: “x\ufffdy”" in body  # the field in the reader's words, the control shown
    assert 'href="/panel/sign-in"' in body  # back to the form's page


def test_not_found_gets_the_not_found_page() -> None:
    answer = service_refused(_request("/panel/sign-in", "GET"), NotFound("gone"))
    assert answer is not None and answer.status_code == 404


def test_the_api_keeps_its_json() -> None:
    assert service_refused(_request("/v1/agents"), NotFound("gone")) is None
