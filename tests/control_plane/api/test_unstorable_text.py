"""Text the database cannot store (a NUL character) is a 422 naming the field, never a 500."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock


@pytest.mark.parametrize(
    ("audience", "method", "path", "body", "field"),
    [
        pytest.param(
            "operator",
            "PUT",
            "/v1/admin/brake",
            {"engaged": True, "reason": "bad\x00build"},
            "reason",
            id="brake_reason",
        ),
        pytest.param(
            "panel",
            "PUT",
            "/v1/webhook",
            {"url": "https://hooks.example/\x00"},
            "url",
            id="webhook_url",
        ),
        pytest.param(
            "panel",
            "PUT",
            "/v1/webhook",
            {"url": "https://hooks.example/", "secret": "0123456789abcdef\x00"},
            "secret",
            id="webhook_secret",
        ),
        pytest.param(
            "agent",
            "POST",
            "/v1/agent/claims",
            {"slot_key": "2026-11-30T03:00", "from_version": "1.4\x00"},
            "from_version",
            id="claim_from_version",
        ),
        pytest.param(
            "agent",
            "POST",
            "/v1/agent/runs",
            {"slot_key": "2026-11-30T03:00", "status": "up_to_date", "version": "1.5\x00"},
            "version",
            id="nothing_to_do_version",
        ),
    ],
)
def test_a_nul_character_is_a_422_naming_the_field(
    api: Api,
    clock: ManualClock,
    operator_key: str,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    audience: str,
    method: str,
    path: str,
    body: dict[str, Any],
    field: str,
) -> None:
    del published
    org = make_org()
    agent = make_agent(org)
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    key = {"operator": operator_key, "panel": org.panel_key, "agent": agent.agent_key}[audience]
    with api.client(key) as client:
        response = client.request(method, path, json=body)
    assert response.status_code == 422
    assert response.json()["detail"]["message"].startswith(f"{field}: ")
