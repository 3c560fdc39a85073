"""A poll that says two things is never answered from memory: the answer kept from the same
agent's plain poll would be a guess at which of the two it meant. The routes refuse it (422
naming the header, `api.deps.said_once`), whichever value comes first."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from control_plane.answers_cache.feed import ChangeFeed
from control_plane.registry import Services
from ground.contract import CONFIG_PATH
from tests.control_plane.conftest import Agent, Api, Org


@pytest.mark.parametrize(
    ("headers", "named"),
    [
        pytest.param(
            [(b"x-nachtwacht-contract", b"7"), (b"x-nachtwacht-contract", b"6")],
            "X-Nachtwacht-Contract",
            id="two_contracts",
        ),
        pytest.param(
            [(b"content-type", b"application/json"), (b"content-type", b"text/plain")],
            "Content-Type",
            id="two_content_types",
        ),
        pytest.param(
            [(b"x-nachtwacht-host-id", b"host-0001"), (b"x-nachtwacht-host-id", b"host-0002")],
            "X-Nachtwacht-Host-Id",
            id="two_hosts",
        ),
        pytest.param(
            [(b"range", b"bytes=0-1"), (b"range", b"bytes=2-3")], "Range", id="two_ranges"
        ),
    ],
)
def test_a_poll_saying_two_things_is_the_routes_422_even_when_remembered(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    headers: list[tuple[bytes, bytes]],
    named: str,
) -> None:
    agent = make_agent(make_org())
    key = (b"authorization", f"Bearer {agent.agent_key}".encode())
    with httpx.Client(timeout=30) as client:
        plain = client.send(httpx.Request("GET", f"{api.base_url}{CONFIG_PATH}", headers=[key]))
        assert plain.status_code == 200, plain.text[:2000]
        assert services.answers.size() == 1  # remembered
        response = client.send(
            httpx.Request("GET", f"{api.base_url}{CONFIG_PATH}", headers=[key, *headers])
        )
    assert response.status_code == 422, response.text[:2000]
    assert response.json()["detail"]["message"].startswith(f"{named}: "), response.text
