"""The forecast per release and stage: how many agents get each pair's
current release tonight at `canary` and at `everyone`, within the caps — over real HTTP against
a real PostgreSQL.

The night of 2026-11-30 in Europe/Amsterdam: every agent's default 03:00 slot is 02:00 UTC.
With an organisation cap of 1 a minute and the 15-minute window, whose last minute grants no
token (the grant margin), one organisation gets at most 14 updates in the slot.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

NOON_BEFORE = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def _operator(api: Api, key: str, method: str, path: str, **body: Any) -> httpx.Response:
    with api.client(key) as operator:
        return operator.request(method, path, json=body or None)


def _releases(api: Api, key: str) -> list[dict[str, Any]]:
    answer = _operator(api, key, "GET", "/v1/admin/forecast?date=2026-11-30")
    assert answer.status_code == 200, answer.text
    releases: list[dict[str, Any]] = answer.json()["releases"]
    return releases


@pytest.fixture
def night(
    api: Api,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> dict[str, list[Agent]]:
    """Twenty agents of a large organisation (two marked canaries) and five of a small one,
    all at the default 03:00; an organisation cap of 1 a minute; only marked canaries."""
    clock.set(NOON_BEFORE)
    for path, body in (
        ("/v1/admin/settings", {"org_cap": 1}),
        ("/v1/admin/rollout/settings", {"canary_share_percent": 0}),
    ):
        assert (
            _operator(
                api, operator_key, "PATCH" if "rollout" in path else "PUT", path, **body
            ).status_code
            == 200
        )
    large, small = make_org("Large"), make_org("Small")
    agents = {
        "large": [make_agent(large, f"web-{n:02d}") for n in range(20)],
        "small": [make_agent(small, f"db-{n:02d}") for n in range(5)],
    }
    for canary in agents["large"][:2]:
        marked = _operator(
            api, operator_key, "PUT", f"/v1/admin/agents/{canary.agent_id}/canary", canary=True
        )
        assert marked.status_code == 200
    return agents


def test_the_forecast_says_how_many_get_the_release_at_each_stage_within_the_caps(
    api: Api, operator_key: str, night: dict[str, list[Agent]]
) -> None:
    [release] = _releases(api, operator_key)
    assert (release["version"], release["stage"], release["halted"]) == ("1.6.0", "canary", False)
    # Tonight at its canary stage: the two canaries. The large organisation's other 18 agents
    # run nothing yet and take 1.5.0 in the same slot: its cap serves 14 of its 20, and the
    # canaries' part of that is 14 * 2 / 20, rounded down.
    assert release["canary"] == {"agents": 2, "can_update": 1, "will_miss": 1}
    # Promoted before the night: the large organisation's 20 meet its cap of 14 in the window,
    # the small one's 5 all fit.
    assert release["everyone"] == {"agents": 25, "can_update": 19, "will_miss": 6}


def test_canaries_alone_in_their_slot_all_fit(
    api: Api, pool: Pool, operator_key: str, night: dict[str, list[Agent]]
) -> None:
    """Once the others run 1.5.0 they ask for nothing tonight: the canaries have the cap."""
    with pool.connection() as conn:
        for agent in night["large"][2:] + night["small"]:
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, version,"
                " created_at, finished_at) SELECT id, org_id, 'schedule', '2026-11-28T03:00',"
                " %(at)s, 'succeeded', '1.5.0', %(at)s, %(at)s FROM agents WHERE id = %(id)s",
                {"id": agent.agent_id, "at": datetime(2026, 11, 28, 2, 5, tzinfo=UTC)},
            )
            # What the report of that run sets: the version the agent runs.
            conn.execute(
                "UPDATE agents SET current_version = '1.5.0' WHERE id = %s", [agent.agent_id]
            )
    [release] = _releases(api, operator_key)
    assert release["canary"] == {"agents": 2, "can_update": 2, "will_miss": 0}
    assert release["everyone"] == {"agents": 25, "can_update": 19, "will_miss": 6}


def test_held_and_pinned_agents_are_not_counted_and_a_halted_release_reaches_nobody(
    api: Api, operator_key: str, night: dict[str, list[Agent]]
) -> None:
    small = night["small"]
    held = _operator(
        api, operator_key, "PUT", f"/v1/admin/agents/{small[0].agent_id}/hold",
        until="2026-12-05T00:00:00Z", reason="change freeze",
    )  # fmt: skip
    assert held.status_code == 200, held.text
    pinned = _operator(
        api, operator_key, "PUT", f"/v1/admin/agents/{small[1].agent_id}/pin", version="1.5.0",
        reason="waits for its vendor",
    )  # fmt: skip
    assert pinned.status_code in (200, 201), pinned.text
    [release] = _releases(api, operator_key)
    assert release["everyone"] == {"agents": 23, "can_update": 17, "will_miss": 6}

    release_id = release["release_id"]
    halted = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{release_id}/halt", reason="bad build"
    )
    assert halted.status_code == 200
    [release] = _releases(api, operator_key)
    assert release["halted"] is True
    assert release["canary"] == {"agents": 2, "can_update": 0, "will_miss": 2}
    assert release["everyone"]["can_update"] == 0


def test_once_promoted_the_canary_stage_is_no_longer_forecast(
    api: Api, operator_key: str, night: dict[str, list[Agent]]
) -> None:
    [release] = _releases(api, operator_key)
    promoted = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{release['release_id']}/promote",
        reason="canaries fine",
    )  # fmt: skip
    assert promoted.status_code == 200
    [release] = _releases(api, operator_key)
    assert release["stage"] == "everyone"
    assert release["canary"] is None
    assert release["everyone"] == {"agents": 25, "can_update": 19, "will_miss": 6}
