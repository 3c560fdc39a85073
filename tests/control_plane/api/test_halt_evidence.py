"""A halt's evidence names the agents: each tripping run with its agent, organisation, versions,
outcome and reason — in `GET /v1/admin/releases/{id}/halts`, and (bounded) in the halt's one
notice; `/metrics` counts every release's outcomes by reason.

Over real HTTP against a real PostgreSQL, on the 03:00 slot of 2026-11-30 (02:00 UTC).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid4

from control_plane.rollout.halts import NOTICE_AGENTS_SHOWN, HaltRun, HaltView, notice_agents
from tests.control_plane.api.conftest import AT_0301, Rollout, TwoReleases
from tests.control_plane.conftest import Agent


def _report(rollout: Rollout, agent: Agent, run_id: str, **outcome: Any) -> None:
    with rollout.api.client(agent.agent_key) as client:
        answer = client.patch(f"/v1/agent/runs/{run_id}", json=outcome)
    assert answer.status_code == 200, answer.text


def _halted_night(rollout: Rollout) -> dict[str, Agent]:
    """Four canaries in two organisations claim 1.6.0 from 1.5.0: one succeeds, one fails its
    health check and rolls back, one fails to install, one is still downloading; the reconcile
    step then halts the release (2 of 3 finished runs failed, threshold 2 and 50 %)."""
    rollout.settings(halt_failures=2, halt_rate_percent=50)
    acme, bravo = rollout.make_org("Acme <Nederland>"), rollout.make_org("Bravo")
    agents = {
        "good": rollout.make_agent(acme, "web-01"),
        "rolled_back": rollout.make_agent(acme, "db-01"),
        "failed": rollout.make_agent(bravo, "edge-01"),
        "busy": rollout.make_agent(bravo, "edge-02"),
    }
    for agent in agents.values():
        rollout.mark_canary(agent)
    rollout.clock.set(AT_0301)
    runs = {name: rollout.claim(agent).json()["run_id"] for name, agent in agents.items()}
    _report(rollout, agents["good"], runs["good"], status="succeeded", version="1.6.0")
    _report(
        rollout,
        agents["rolled_back"],
        runs["rolled_back"],
        status="rolled_back",
        version="1.5.0",
        reason="health_check_failed",
        error="the agent did not answer on :8080 within 30 s",
    )
    rollout.clock.advance(minutes=1)
    _report(
        rollout,
        agents["failed"],
        runs["failed"],
        status="failed",
        version="1.5.0",
        reason="install_failed",
    )
    rollout.clock.advance(minutes=1)
    assert len(rollout.services.rollout.advance(rollout.clock.now()).halts) == 1
    return agents


def test_the_halt_lists_each_tripping_run_with_agent_organisation_versions_and_reason(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    agents = _halted_night(rollout)
    release_id = rollout.release_id("1.6.0")
    answer = rollout.operator("GET", f"/v1/admin/releases/{release_id}/halts")
    assert answer.status_code == 200, answer.text
    halt = answer.json()["halts"][0]
    evidence = halt["evidence"]
    assert [
        (run["agent_name"], run["org_name"], run["from_version"], run["to_version"])
        for run in evidence
    ] == [("db-01", "Acme <Nederland>", "1.5.0", "1.6.0"), ("edge-01", "Bravo", "1.5.0", "1.6.0")]
    assert [(run["status"], run["reason"]) for run in evidence] == [
        ("rolled_back", "health_check_failed"),
        ("failed", "install_failed"),
    ]
    assert evidence[0]["agent_id"] == agents["rolled_back"].agent_id
    assert evidence[0]["org_id"] == agents["rolled_back"].org_id
    assert evidence[0]["error"] == "the agent did not answer on :8080 within 30 s"
    assert evidence[1]["finished_at"] == "2026-11-30T02:02:15Z"
    # The ids stay where readers of the first version of this answer find them.
    assert sorted(halt["runs"]) == sorted(run["run_id"] for run in evidence)


def test_the_one_notice_names_the_agents_of_the_halt(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    _halted_night(rollout)
    notices = rollout.operator("GET", "/v1/admin/notices").json()["notices"]
    assert len(notices) == 1
    body = notices[0]["body"]
    assert [(a["agent_name"], a["org_name"], a["status"]) for a in body["agents"]] == [
        ("db-01", "Acme <Nederland>", "rolled_back"),
        ("edge-01", "Bravo", "failed"),
    ]
    assert body["more_agents"] == 0
    assert len(body["runs"]) == 2


def test_the_release_outcomes_are_counted_by_outcome_and_reason(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    _halted_night(rollout)
    release_id = rollout.release_id("1.6.0")
    text = rollout.operator("GET", "/metrics").text
    counted = {
        (m["outcome"], m["reason"]): float(m["value"])
        for m in re.finditer(
            r"^nachtwacht_release_outcomes_total\{channel=\"stable\",outcome=\"(?P<outcome>\w+)\","
            r"platform=\"linux-x86_64\",reason=\"(?P<reason>\w+)\",release=\"(?P<release>[-0-9a-f]+)\","
            r"version=\"1\.6\.0\"\} (?P<value>\S+)$",
            text,
            re.MULTILINE,
        )
        if m["release"] == release_id
    }
    # The claim still downloading has not ended: it is no outcome yet. Every other outcome of
    # the release is there from the start, at 0.
    assert counted[("failed", "disk_full")] == 0
    assert {key: n for key, n in counted.items() if n} == {
        ("succeeded", "none"): 1,
        ("rolled_back", "health_check_failed"): 1,
        ("failed", "install_failed"): 1,
    }
    assert "nachtwacht_halt_threshold_ratio 0.5\n" in text


def _run(n: int) -> HaltRun:
    return HaltRun(
        run_id=uuid4(),
        agent_id=uuid4(),
        agent_name=f"web-{n:02d}",
        org_id=uuid4(),
        org_name="Acme",
        from_version="1.5.0",
        to_version="1.6.0",
        status="failed",
        reason=None,
        error=None,
        finished_at=None,
    )


def test_a_notice_names_a_bounded_number_of_agents_and_counts_the_rest() -> None:
    runs = tuple(_run(n) for n in range(NOTICE_AGENTS_SHOWN + 3))
    halt = HaltView(
        id=uuid4(),
        release_id=UUID(int=1),
        halted_at=datetime(2026, 11, 30, 2, 3, tzinfo=UTC),
        cause="errors",
        reason="13 of 13 finished runs failed",
        halted_by="rollout",
        failures=len(runs),
        finished=len(runs),
        runs=tuple(run.run_id for run in runs),
        evidence=runs,
        resumed_at=None,
        resumed_by=None,
        resume_reason=None,
    )
    named = notice_agents(halt)
    assert [agent["agent_name"] for agent in named["agents"]] == [
        f"web-{n:02d}" for n in range(NOTICE_AGENTS_SHOWN)
    ]
    assert named["more_agents"] == 3
