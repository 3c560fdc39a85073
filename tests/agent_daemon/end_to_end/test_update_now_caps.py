"""The panel's bulk "Update now" goes through the organisation's cap, end to end: a real control
plane on the embedded PostgreSQL with an organisation cap of 1, three real `nachtwacht agent run`
daemons, real signed builds and install roots, on one fast fake clock. All three are asked at
once in the panel; the control plane grants one a round, the others are told the round is full,
wait, and claim again; every host ends on the new release.

Every wait is for a product instant or an event, bounded by a generous deadline for failures;
nothing asserts how long anything took.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local
from tests.panel.conftest import csrf_of

pytestmark = pytest.mark.slow

ORG_CAP = 1
HOSTS = 3


@pytest.fixture
def afternoon(tmp_path: Path, control_plane_server: Any) -> Iterator[Night]:
    # 10:00: no scheduled slot is due, so only the manual updates can change the hosts.
    clock = NightClock.held(local("2026-11-30T10:00"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(
        root=tmp_path / "night",
        clock=clock,
        start_control_plane=control_plane_server,
        control_plane_args=("--org-cap", str(ORG_CAP)),
    )
    try:
        yield scenario
    finally:
        scenario.close()


def _update_now_in_the_panel(scenario: Night, agent_ids: list[str]) -> None:
    """The customer ticks the agents on the agent list and presses "Update now"."""
    panel_key = str(scenario.panel.headers["Authorization"]).removeprefix("Bearer ")
    with httpx.Client(base_url=scenario.plane.base_url, timeout=60) as client:
        form = client.get("/panel/sign-in")
        signed_in = client.post(
            "/panel/sign-in", data={"key": panel_key, "csrf": csrf_of(form.text)}
        )
        assert signed_in.status_code == 303, signed_in.text
        page = client.get("/panel/agents")
        assert page.status_code == 200, page.text
        answer = client.post(
            "/panel/agents/bulk",
            data={"csrf": csrf_of(page.text), "action": "update", "agent": agent_ids},
            follow_redirects=True,
        )
    # The form answers with a redirect to the list, which says its result once.
    assert [r.status_code for r in answer.history] == [303], answer.history
    assert answer.status_code == 200, answer.text
    assert f"An update now was asked for {len(agent_ids)} agents" in answer.text


def _tokens(database_url: str, org_id: str) -> list[dict[str, Any]]:
    with psycopg.connect(database_url, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute(
            "SELECT t.round_start, t.granted_at, t.revoked_at, t.expires_at, r.finished_at"
            " FROM tokens t JOIN runs r ON r.id = t.run_id"
            " WHERE r.org_id = %s AND r.trigger = 'manual'",
            [UUID(org_id)],
        ).fetchall()


def test_bulk_update_now_is_granted_one_round_at_a_time_and_updates_every_host(
    afternoon: Night,
) -> None:
    scenario = afternoon
    scenario.publish("1.5.0", 42)
    hosts = [scenario.add_host(f"web-{n:02}") for n in range(HOSTS)]
    daemons = [host.start() for host in hosts]
    for daemon in daemons:
        daemon.wait_for("config.synced")
    _update_now_in_the_panel(scenario, [host.agent_id for host in hosts])

    for daemon in daemons:
        granted = daemon.wait_for("manual.granted")
        assert granted["version"] == "1.5.0"
        done = daemon.wait_for("update.succeeded", run_id=granted["run_id"])
        daemon.wait_for("report.delivered", run_id=done["run_id"])
    for host in hosts:
        assert host.current_version() == "1.5.0"
        (run,) = scenario.runs(host)
        assert (run["trigger"], run["status"], run["version"]) == ("manual", "succeeded", "1.5.0")

    # The cap's proof is the control plane's record: never more than ORG_CAP grants a round.
    tokens = _tokens(scenario.plane.database_url, scenario.org_id)
    assert len(tokens) == HOSTS
    per_round = Counter(token["round_start"] for token in tokens)
    assert None not in per_round, "every grant was counted in a round"
    assert max(per_round.values()) <= ORG_CAP, per_round
    # Whoever was told the round was full heard it as the organisation's cap, did not end its
    # request, and was granted after. (On a loaded machine the daemons' ticks may fall in
    # different rounds already; then fewer are refused, and the rounds above still prove the
    # cap.)
    refused = [e for d in daemons for e in d.named("claim.refused")]
    assert {e["code"] for e in refused} <= {"org_cap"}
    for daemon in daemons:
        assert daemon.named("manual.refused") == []
        told = daemon.named("claim.refused")
        if told:
            granted_at = daemon.named("manual.granted")[0]["server_time"]
            assert told[0]["server_time"] < granted_at
            assert told[0]["run_id"] == daemon.named("manual.granted")[0]["run_id"]
