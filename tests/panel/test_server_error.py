"""An unexpected exception under /panel/ (a defect) answers the panel's own 500 page in the
reader's language, never the exception's text: a short reference the reader can pass on, which
the log line with the exception carries too. The API keeps its plain 500. A route made to fail
for the test stands for any defect."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from datetime import UTC, datetime

import httpx
import pytest
from fastapi import FastAPI

from control_plane.api.app import create_app
from control_plane.database import open_pool
from control_plane.registry import build_services
from tests.worlds.clocks import ManualClock

SECRET = "password=hunter2 at /srv/nachtwacht/control_plane/x.py"


def _call(app: FastAPI, method: str, path: str, language: str = "en") -> httpx.Response:
    """One request through the whole app in process (its middleware and error handling)."""

    async def call() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            return await client.request(method, path, headers={"Accept-Language": language})

    return asyncio.run(call())


@pytest.fixture
def failing_app(database_url: str) -> Iterator[FastAPI]:
    with open_pool(database_url, min_size=1, max_size=2) as pool:
        app = create_app(build_services(pool, {}), ManualClock(datetime(2027, 3, 26, tzinfo=UTC)))

        def fail() -> None:
            raise RuntimeError(SECRET)

        app.add_api_route("/panel/test-failure", fail, methods=["GET", "POST"])
        app.add_api_route("/v1/test-failure", fail, methods=["GET"])
        yield app


def test_a_defect_under_the_panel_gets_its_page_and_a_reference_in_the_log(
    failing_app: FastAPI, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        answer = _call(failing_app, "GET", "/panel/test-failure", "nl")
    assert answer.status_code == 500
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-language"] == "nl"
    assert "Er ging iets mis" in answer.text
    assert "hunter2" not in answer.text and "RuntimeError" not in answer.text
    assert "Traceback" not in answer.text
    found = re.search(r"<code id=\"reference\">([0-9a-f]{12})</code>", answer.text)
    assert found is not None, answer.text
    reference = found.group(1)
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged, [r.getMessage() for r in caplog.records]
    assert logged[0].exc_info is not None and SECRET in str(logged[0].exc_info[1])
    assert "GET /panel/test-failure" in logged[0].getMessage()

    # Another failure, another reference; a form's POST too.
    again = _call(failing_app, "POST", "/panel/test-failure", "de")
    assert again.status_code == 500
    assert again.headers["content-language"] == "de"
    other = re.search(r"<code id=\"reference\">([0-9a-f]{12})</code>", again.text)
    assert other is not None and other.group(1) != reference


def test_the_api_keeps_its_plain_500_without_the_detail(failing_app: FastAPI) -> None:
    answer = _call(failing_app, "GET", "/v1/test-failure")
    assert answer.status_code == 500
    assert "hunter2" not in answer.text
    assert not answer.headers["content-type"].startswith("text/html")
