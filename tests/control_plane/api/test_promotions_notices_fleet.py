"""Promotions, notices, the fleet by version and the organisations' names, over real HTTP against a
real PostgreSQL: a promotion needs a reason and keeps it, a notice marked read leaves the unread
count with an event naming who read it, the fleet by version in one query, the organisations' names.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import pytest

from control_plane.agents.fleet import FleetVersionCount
from tests.control_plane.api.conftest import AT_0301, Rollout, TwoReleases
from tests.control_plane.conftest import Agent


def _halted_notice(rollout: Rollout, agent: Agent) -> str:
    """A canary's rolled-back run halts 1.6.0 by itself: one notice in the inbox."""
    rollout.settings(canary_share_percent=0, halt_failures=1, halt_rate_percent=50)
    rollout.mark_canary(agent)
    rollout.clock.set(AT_0301)
    run_id = rollout.claim(agent).json()["run_id"]
    rollout.report(agent, run_id, "rolled_back", "1.5.0")
    rollout.clock.advance(minutes=1)
    assert len(rollout.services.rollout.advance(rollout.clock.now()).halts) == 1
    notices = rollout.operator("GET", "/v1/admin/notices").json()["notices"]
    assert len(notices) == 1
    notice_id: str = notices[0]["id"]
    return notice_id


@pytest.mark.parametrize(
    "body",
    [
        pytest.param({}, id="no_reason"),
        pytest.param({"reason": ""}, id="empty_reason"),
        pytest.param({"reason": "   "}, id="blank_reason"),
        pytest.param({"reason": "x" * 501}, id="reason_too_long"),
    ],
)
def test_a_promotion_without_a_reason_is_refused_and_the_release_stays_canary(
    rollout: Rollout, two_releases: TwoReleases, body: dict[str, Any]
) -> None:
    release_id = rollout.release_id("1.6.0")
    with rollout.api.client(rollout.operator_key) as operator:
        refused = operator.post(f"/v1/admin/releases/{release_id}/promote", json=body)
    assert refused.status_code == 422, refused.text
    assert "reason" in refused.text
    overview = rollout.operator("GET", "/v1/admin/rollout").json()
    assert [pair["stage"] for pair in overview["pairs"]] == ["canary"]


def test_a_promotion_keeps_its_reason_in_the_stage_change_event(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    promoted = rollout.promote("1.6.0", reason="the canaries ran a week without trouble")
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["reason"] == "the canaries ran a week without trouble"
    event = rollout.only_event("release.promoted")
    assert event["actor_kind"] == "operator"
    assert event["data"]["reason"] == "the canaries ran a week without trouble"
    assert event["data"]["after_soak"] is False


def test_a_notice_marked_read_leaves_the_unread_count_with_its_reader_in_the_trail(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    notice_id = _halted_notice(rollout, rollout.make_agent(rollout.make_org()))
    read = rollout.operator("POST", f"/v1/admin/notices/{notice_id}/read")
    assert read.status_code == 200, read.text
    assert read.json()["read_at"] == "2026-11-30T02:02:15Z"
    rollout.clock.advance(minutes=5)
    again = rollout.operator("POST", f"/v1/admin/notices/{notice_id}/read")
    # Read twice: the first instant stays, and the trail holds one event.
    assert again.json()["read_at"] == "2026-11-30T02:02:15Z"
    notices = rollout.operator("GET", "/v1/admin/notices").json()["notices"]
    assert [n["read_at"] for n in notices] == ["2026-11-30T02:02:15Z"]
    with rollout.pool.connection() as conn:
        events = conn.execute(
            "SELECT actor_kind, actor_name, data FROM events WHERE kind = 'notice.read'"
        ).fetchall()
    assert len(events) == 1
    assert events[0]["actor_kind"] == "operator"
    assert events[0]["data"] == {"notice_id": notice_id, "notice_kind": "release.halted"}


@pytest.mark.parametrize(
    ("notice_id", "status"),
    [
        pytest.param("00000000-0000-0000-0000-000000000000", 404, id="unknown_notice"),
        pytest.param("not-a-uuid", 422, id="not_an_id"),
    ],
)
def test_marking_a_notice_that_does_not_exist_is_refused(
    rollout: Rollout, notice_id: str, status: int
) -> None:
    refused = rollout.operator("POST", f"/v1/admin/notices/{notice_id}/read")
    assert refused.status_code == status, refused.text


def test_a_customer_cannot_mark_the_operators_notices_read(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org = rollout.make_org()
    notice_id = _halted_notice(rollout, rollout.make_agent(org))
    with rollout.api.client(org.panel_key) as customer:
        refused = customer.post(f"/v1/admin/notices/{notice_id}/read")
    assert refused.status_code in (401, 403)
    notices = rollout.services.rollout.notices().notices
    assert [n.read_at for n in notices] == [None]


def test_the_fleet_by_version_places_each_agent_on_its_pair_in_one_query(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    first, second = rollout.make_org("Acme"), rollout.make_org("Zeta")
    polled = rollout.make_agent(first, "web-01")
    with rollout.api.client(polled.agent_key) as client:
        assert client.get("/v1/agent/config").status_code == 200
    published_only = rollout.make_agent(second, "db-01")
    rollout.make_agent(
        second, "db-02"
    )  # reported no version and never asked: its pair is not known
    gone = rollout.make_agent(second, "db-03")
    with rollout.pool.connection() as conn:
        conn.execute(
            "UPDATE agents SET current_version = '1.5.0' WHERE id = ANY(%s)",
            [[UUID(polled.agent_id), UUID(published_only.agent_id), UUID(gone.agent_id)]],
        )
        conn.execute("UPDATE agents SET deleted_at = now() WHERE id = %s", [gone.agent_id])
    counts = set(rollout.services.fleet.versions().counts)
    assert counts == {
        FleetVersionCount(channel="stable", platform="linux-x86_64", version="1.5.0", agents=2),
        FleetVersionCount(channel=None, platform=None, version=None, agents=1),
    }


def test_the_organisations_names_are_listed_by_name(rollout: Rollout) -> None:
    zeta, acme = rollout.make_org("Zeta"), rollout.make_org("Acme")
    names = [(str(o.org_id), o.name) for o in rollout.services.fleet.org_names().orgs]
    assert names == [(acme.org_id, "Acme"), (zeta.org_id, "Zeta")]
