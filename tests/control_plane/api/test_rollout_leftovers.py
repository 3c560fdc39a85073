"""The operators' remaining rollout pieces (issues 14 and 15), over real HTTP against a real
PostgreSQL: a promotion needs a reason and keeps it, a notice marked read leaves the unread
count with an event naming who read it, the fleet by version in one query, the organisations'
names.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.agents.fleet import FleetVersionCount
from control_plane.registry import Services
from control_plane.types import Pool
from nachtwacht.worlds.clocks import ManualClock
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release

SLOT = "2026-11-30T03:00"
AT_0301 = datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC)


@pytest.fixture
def two_releases(
    services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> tuple[SignedRelease, SignedRelease]:
    """Stable 1.5.0 (everyone), then 1.6.0 (canary)."""
    old = sign_release(release_key, version="1.5.0", manifest_version=42)
    new = sign_release(release_key, version="1.6.0", manifest_version=43)
    for release in (old, new):
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now()
        )
    return old, new


def _release_id(services: Services, version: str) -> str:
    for track in services.releases.list().tracks:
        for entry in track.releases:
            if entry.version == version:
                return str(entry.id)
    raise AssertionError(f"no release {version}")


def _operator(api: Api, key: str, method: str, path: str, **body: Any) -> httpx.Response:
    with api.client(key) as operator:
        return operator.request(method, path, json=body or None)


def _halted_notice(
    api: Api,
    services: Services,
    clock: ManualClock,
    operator_key: str,
    agent: Agent,
) -> str:
    """A canary's rolled-back run halts 1.6.0 by itself: one notice in the inbox."""
    _operator(
        api, operator_key, "PATCH", "/v1/admin/rollout/settings",
        canary_share_percent=0, halt_failures=1, halt_rate_percent=50,
    )  # fmt: skip
    _operator(api, operator_key, "PUT", f"/v1/admin/agents/{agent.agent_id}/canary", canary=True)
    clock.set(AT_0301)
    with api.client(agent.agent_key) as client:
        run_id = client.post(
            "/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.5.0"}
        ).json()["run_id"]
        reported = client.patch(
            f"/v1/agent/runs/{run_id}", json={"status": "rolled_back", "version": "1.5.0"}
        )
    assert reported.status_code == 200, reported.text
    clock.advance(minutes=1)
    assert len(services.rollout.advance(clock.now()).halts) == 1
    notices = _operator(api, operator_key, "GET", "/v1/admin/notices").json()["notices"]
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
    api: Api,
    services: Services,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    body: dict[str, Any],
) -> None:
    release_id = _release_id(services, "1.6.0")
    with api.client(operator_key) as operator:
        refused = operator.post(f"/v1/admin/releases/{release_id}/promote", json=body)
    assert refused.status_code == 422, refused.text
    assert "reason" in refused.text
    rollout = _operator(api, operator_key, "GET", "/v1/admin/rollout").json()
    assert [pair["stage"] for pair in rollout["pairs"]] == ["canary"]


def test_a_promotion_keeps_its_reason_in_the_stage_change_event(
    api: Api,
    services: Services,
    pool: Pool,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
) -> None:
    release_id = _release_id(services, "1.6.0")
    promoted = _operator(
        api, operator_key, "POST", f"/v1/admin/releases/{release_id}/promote",
        reason="the canaries ran a week without trouble",
    )  # fmt: skip
    assert promoted.status_code == 200, promoted.text
    assert promoted.json()["reason"] == "the canaries ran a week without trouble"
    with pool.connection() as conn:
        event = conn.execute(
            "SELECT actor_kind, data FROM events WHERE kind = 'release.promoted'"
        ).fetchone()
    assert event is not None
    assert event["actor_kind"] == "operator"
    assert event["data"]["reason"] == "the canaries ran a week without trouble"
    assert event["data"]["after_soak"] is False


def test_a_notice_marked_read_leaves_the_unread_count_with_its_reader_in_the_trail(
    api: Api,
    services: Services,
    pool: Pool,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    notice_id = _halted_notice(api, services, clock, operator_key, make_agent(make_org()))
    read = _operator(api, operator_key, "POST", f"/v1/admin/notices/{notice_id}/read")
    assert read.status_code == 200, read.text
    assert read.json()["read_at"] == "2026-11-30T02:02:15Z"
    clock.advance(minutes=5)
    again = _operator(api, operator_key, "POST", f"/v1/admin/notices/{notice_id}/read")
    # Read twice: the first instant stays, and the trail holds one event.
    assert again.json()["read_at"] == "2026-11-30T02:02:15Z"
    notices = _operator(api, operator_key, "GET", "/v1/admin/notices").json()["notices"]
    assert [n["read_at"] for n in notices] == ["2026-11-30T02:02:15Z"]
    with pool.connection() as conn:
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
    api: Api, operator_key: str, notice_id: str, status: int
) -> None:
    refused = _operator(api, operator_key, "POST", f"/v1/admin/notices/{notice_id}/read")
    assert refused.status_code == status, refused.text


def test_a_customer_cannot_mark_the_operators_notices_read(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    notice_id = _halted_notice(api, services, clock, operator_key, make_agent(org))
    with api.client(org.panel_key) as customer:
        refused = customer.post(f"/v1/admin/notices/{notice_id}/read")
    assert refused.status_code in (401, 403)
    notices = services.rollout.notices().notices
    assert [n.read_at for n in notices] == [None]


def test_the_fleet_by_version_places_each_agent_on_its_pair_in_one_query(
    api: Api,
    services: Services,
    pool: Pool,
    two_releases: tuple[SignedRelease, SignedRelease],
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    first, second = make_org("Acme"), make_org("Zeta")
    polled = make_agent(first, "web-01")
    with api.client(polled.agent_key) as client:
        assert client.get("/v1/agent/config").status_code == 200
    published_only = make_agent(second, "db-01")
    make_agent(second, "db-02")  # reported no version and never asked: its pair is not known
    gone = make_agent(second, "db-03")
    with pool.connection() as conn:
        conn.execute(
            "UPDATE agents SET current_version = '1.5.0' WHERE id = ANY(%s)",
            [[UUID(polled.agent_id), UUID(published_only.agent_id), UUID(gone.agent_id)]],
        )
        conn.execute("UPDATE agents SET deleted_at = now() WHERE id = %s", [gone.agent_id])
    counts = set(services.fleet.versions().counts)
    assert counts == {
        FleetVersionCount(channel="stable", platform="linux-x86_64", version="1.5.0", agents=2),
        FleetVersionCount(channel=None, platform=None, version=None, agents=1),
    }


def test_the_organisations_names_are_listed_by_name(
    services: Services, make_org: Callable[..., Org]
) -> None:
    zeta, acme = make_org("Zeta"), make_org("Acme")
    names = [(str(o.org_id), o.name) for o in services.fleet.org_names().orgs]
    assert names == [(acme.org_id, "Acme"), (zeta.org_id, "Zeta")]
