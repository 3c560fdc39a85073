"""The order of a scheduled claim's refusals, over real HTTP against a real PostgreSQL: what stops
this agent (the brake, a hold, a halted release, a release this host rolled back) is answered
before whether the slot is still there, and that before the caps. A held agent in a full round is
told it is held — and its slot is recorded as missed for that reason — not to come back next
round.

Stable 1.5.0 (everyone) and 1.6.0 (canary) are published by `two_releases`; nobody is a canary,
so every agent is offered 1.5.0.
"""

from __future__ import annotations

import httpx

from tests.control_plane.api.conftest import AT_0301, NEXT_SLOT, SLOT, Rollout, TwoReleases
from tests.control_plane.conftest import Agent, Org

AT_0301_NEXT_NIGHT = AT_0301.replace(day=1, month=12)


def _code(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["detail"]["code"]


def _full_round(rollout: Rollout, slot: str = SLOT) -> tuple[Org, Agent]:
    """An organisation whose round is full (its cap is 1 and one agent holds the grant), and
    another agent of it that has not claimed."""
    answer = rollout.operator("PUT", "/v1/admin/settings", org_cap=1)
    assert answer.status_code == 200, answer.text
    org = rollout.make_org()
    first = rollout.make_agent(org, "web-01")
    granted = rollout.claim(first, slot)
    assert granted.status_code == 201, granted.text
    return org, rollout.make_agent(org, "web-02")


def _slot_runs(rollout: Rollout, agent: Agent) -> list[tuple[str, str | None, str | None]]:
    with rollout.pool.connection() as conn:
        rows = conn.execute(
            "SELECT slot_key, status, coalesce(miss_reason, skip_reason) AS why FROM runs"
            " WHERE agent_id = %s AND trigger = 'schedule' ORDER BY slot_at",
            [agent.agent_id],
        ).fetchall()
    return [(row["slot_key"], row["status"], row["why"]) for row in rows]


def test_a_held_agent_in_a_full_round_is_told_it_is_held(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    rollout.clock.set(AT_0301)
    org, held = _full_round(rollout)
    with rollout.api.client(org.panel_key) as panel:
        answer = panel.put(
            f"/v1/agents/{held.agent_id}/hold",
            json={"until": "2026-12-07T00:00:00Z", "reason": "month-end close"},
        )
    assert answer.status_code == 200, answer.text
    assert _code(rollout.claim(held)) == (409, "held")
    assert _slot_runs(rollout, held) == [(SLOT, "missed", "held")]
    # Asked again (the answer was lost): the same refusal, the same one run.
    assert _code(rollout.claim(held)) == (409, "held")
    assert _slot_runs(rollout, held) == [(SLOT, "missed", "held")]


def test_an_agent_offered_a_halted_release_in_a_full_round_is_told_it_is_halted(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    rollout.clock.set(AT_0301)
    _, agent = _full_round(rollout)
    halted = rollout.operator(
        "POST", f"/v1/admin/releases/{rollout.release_id('1.5.0')}/halt", reason="looks wrong"
    )
    assert halted.status_code == 200, halted.text
    assert _code(rollout.claim(agent)) == (409, "release_halted")
    assert _slot_runs(rollout, agent) == [(SLOT, "skipped", "release_halted")]


def test_a_host_that_rolled_the_release_back_is_told_so_in_a_full_round(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org, "db-01")
    rollout.clock.set(AT_0301)
    grant = rollout.claim(agent, from_version="1.4.1")
    assert grant.status_code == 201, grant.text
    rollout.report(agent, grant.json()["run_id"], "rolled_back", "1.4.1")

    rollout.clock.set(AT_0301_NEXT_NIGHT)
    answer = rollout.operator("PUT", "/v1/admin/settings", org_cap=1)
    assert answer.status_code == 200, answer.text
    filled = rollout.claim(rollout.make_agent(org, "web-01"), NEXT_SLOT)
    assert filled.status_code == 201, filled.text
    assert _code(rollout.claim(agent, NEXT_SLOT, from_version="1.4.1")) == (
        409,
        "release_rolled_back",
    )
    assert _slot_runs(rollout, agent)[-1] == (NEXT_SLOT, "skipped", "release_rolled_back")


def test_the_brake_comes_before_a_hold_and_a_hold_before_a_closed_window(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(AT_0301)
    with rollout.api.client(org.panel_key) as panel:
        answer = panel.put(
            f"/v1/agents/{agent.agent_id}/hold",
            json={"until": "2026-12-07T00:00:00Z", "reason": "audit"},
        )
    assert answer.status_code == 200, answer.text
    engaged = rollout.operator("PUT", "/v1/admin/brake", engaged=True, reason="incident 42")
    assert engaged.status_code == 200, engaged.text
    assert _code(rollout.claim(agent)) == (503, "brake")
    released = rollout.operator("PUT", "/v1/admin/brake", engaged=False)
    assert released.status_code == 200, released.text
    # Yesterday's slot: its window closed long ago, but the hold is what stops this agent.
    assert _code(rollout.claim(agent, "2026-11-29T03:00")) == (409, "held")
    # Nothing recorded for a slot that is not open: there is no slot to consume.
    assert _slot_runs(rollout, agent) == []
