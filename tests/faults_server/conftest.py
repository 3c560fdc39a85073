"""The control plane's side under the faults that broke it: the fixtures of
`tests/control_plane/conftest.py` (a real PostgreSQL, the API over loopback, a clock the test
sets), and a claimed scheduled run."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.control_plane.conftest import (
    Agent,
    Api,
    Org,
    SignedRelease,
    api,
    clock,
    make_agent,
    make_org,
    operator_key,
    pool,
    published,
    release_key,
    services,
)
from tests.worlds.clocks import ManualClock

__all__ = [
    "NIGHT",
    "SLOT",
    "api",
    "clock",
    "make_agent",
    "make_org",
    "operator_key",
    "pool",
    "published",
    "release_key",
    "services",
]

SLOT = "2026-11-30T03:00"  # 02:00Z: Amsterdam is UTC+1 in winter; the window closes at 02:15Z
NIGHT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.fixture
def org(make_org: Callable[..., Org]) -> Org:
    return make_org()


@pytest.fixture
def agent(org: Org, make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(org)


def claim(api: Api, agent: Agent, slot_key: str = SLOT) -> dict[str, Any]:
    with api.client(agent.agent_key) as client:
        response = client.post(
            "/v1/agent/claims", json={"slot_key": slot_key, "from_version": "1.4.1"}
        )
    assert response.status_code in {200, 201}, response.text
    body: dict[str, Any] = response.json()
    return body


@pytest.fixture
def claimed(api: Api, clock: ManualClock, published: SignedRelease, agent: Agent) -> dict[str, Any]:
    """Agent web-01 holds a token for the 03:00 slot, granted at 02:01Z."""
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    return claim(api, agent)
