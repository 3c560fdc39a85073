"""Notifications: one per organisation per slot after its window,
only scheduled runs, a failure named once per agent per calendar day, an agent silent for three
days named once a day, and `notify_considered_at` written even for silence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest

from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import OutcomeReason
from tests.control_plane.conftest import Api
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, NIGHT_KEY, Fleet, FleetAgent
from tests.worlds.clocks import ManualClock


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, services, clock)
    yield made
    made.close()


def _notification_body(fleet: Fleet, org: UUID, slot_key: str) -> dict[str, Any]:
    [notification] = [n for n in fleet.notifications(org) if n["slot_key"] == slot_key]
    body: dict[str, Any] = notification["body"]
    return body


def _considered(fleet: Fleet) -> list[bool]:
    rows = fleet.rows("SELECT notify_considered_at FROM runs ORDER BY created_at, id")
    return [row["notify_considered_at"] is not None for row in rows]


def test_forty_results_of_one_organisation_are_one_notification(fleet: Fleet) -> None:
    org = fleet.org("Acme")
    agents = [fleet.agent(org, f"web-{n:02d}") for n in range(40)]
    for agent in agents[:37]:
        fleet.run(agent, "succeeded", version="1.5.0")
    fleet.run(agents[37], "up_to_date", version="1.5.0")
    fleet.run(agents[38], "failed", version="1.4.1", error="health check failed")
    fleet.run(agents[39], "rolled_back", version="1.4.1", error="agent did not start")
    report = fleet.reconcile(AFTER_NIGHT)
    assert (report.review.reviewed, report.review.notified) == (1, 1)
    [notification] = fleet.notifications(org)
    body = notification["body"]
    assert notification["slot_key"] == NIGHT_KEY
    assert body["counts"] == {
        "agents": 40,
        "updated": 37,
        "up_to_date": 1,
        "failed": 1,
        "rolled_back": 1,
        "missed": 0,
        "no_outcome": 0,
        "unauthorised": 0,
        "skipped": 0,
    }
    assert body["updated"] == [{"version": "1.5.0", "count": 37}]  # counted, not listed
    assert [(entry["name"], entry["status"]) for entry in body["failed"]] == [
        ("web-38", "failed"),
        ("web-39", "rolled_back"),
    ]
    assert "web-37" not in json.dumps(body)  # up to date: counted, not listed
    assert body["summary"] == (
        "2026-11-30 03:00: 40 agents — 37 updated to 1.5.0, 1 already up to date, 1 failed,"
        " 1 rolled back"
    )


def test_a_failure_is_named_with_the_reason_it_ended_so(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.run(
        fleet.agent(org, "web-01"),
        "rolled_back",
        version="1.4.1",
        reason=OutcomeReason.HEALTH_CHECK_FAILED.value,
        error="exit 3",
    )
    fleet.run(fleet.agent(org, "web-02"), "failed", version="1.4.1")
    fleet.reconcile(AFTER_NIGHT)
    body = fleet.notifications(org)[0]["body"]
    assert [(f["name"], f["status"], f["reason"]) for f in body["failed"]] == [
        ("web-01", "rolled_back", "health_check_failed"),
        ("web-02", "failed", None),
    ]


def test_each_organisation_gets_its_own_notification(fleet: Fleet) -> None:
    acme, globex = fleet.org("Acme"), fleet.org("Globex")
    fleet.run(fleet.agent(acme, "a-1"), "failed", version="1.4.1")
    fleet.run(fleet.agent(globex, "g-1"), "failed", version="1.4.1")
    fleet.reconcile(AFTER_NIGHT)
    acme_body = fleet.notifications(acme)[0]["body"]
    assert "a-1" in json.dumps(acme_body) and "g-1" not in json.dumps(acme_body)
    assert len(fleet.notifications(globex)) == 1


def test_missed_agents_are_named_with_their_reason(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.run(fleet.agent(org, "web-01"), "succeeded", version="1.5.0")
    fleet.agent(org, "web-02")
    fleet.reconcile(AFTER_NIGHT)
    body = fleet.notifications(org)[0]["body"]
    assert [(m["name"], m["reason"]) for m in body["missed"]] == [("web-02", "offline")]
    assert body["missed_by_reason"] == {"offline": 1}


def test_a_miss_reason_a_newer_release_recorded_is_named_as_it_is(fleet: Fleet) -> None:
    """A replica already upgraded (a rolling upgrade) may record a miss reason this release does
    not know: the review names it as it is, and the pass goes on."""
    org = fleet.org()
    agent = fleet.agent(org, "web-01")
    fleet.sql("ALTER TABLE runs DROP CONSTRAINT runs_miss_reason_known")
    run_id = fleet.run(agent, "succeeded", version="1.5.0")
    fleet.sql(
        "UPDATE runs SET status = 'missed', version = NULL, miss_reason = 'solar_flare'"
        " WHERE id = %s",
        [run_id],
    )
    fleet.reconcile(AFTER_NIGHT)
    body = fleet.notifications(org)[0]["body"]
    assert [(m["name"], m["reason"]) for m in body["missed"]] == [("web-01", "solar_flare")]
    assert body["missed_by_reason"] == {"solar_flare": 1}


def test_only_up_to_date_agents_is_silence_and_still_considered(fleet: Fleet) -> None:
    org = fleet.org()
    for name in ("web-01", "web-02"):
        fleet.run(fleet.agent(org, name), "up_to_date", version="1.5.0")
    report = fleet.reconcile(AFTER_NIGHT)
    assert (report.review.reviewed, report.review.notified) == (1, 0)
    assert fleet.notifications(org) == []
    assert _considered(fleet) == [True, True]
    review = fleet.one("SELECT decided_at, notification_id FROM slot_reviews")
    assert review == {"decided_at": AFTER_NIGHT, "notification_id": None}


def test_a_slot_is_not_considered_before_its_window_closes(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.run(fleet.agent(org, "web-01"), "succeeded", version="1.5.0")
    fleet.reconcile(NIGHT + timedelta(minutes=10))
    assert fleet.notifications(org) == []
    assert _considered(fleet) == [False]


def test_manual_runs_never_notify(fleet: Fleet) -> None:
    org = fleet.org()
    agent = fleet.agent(org, "web-01")
    fleet.run(agent, "failed", trigger="manual", error="boom")
    fleet.run(agent, "up_to_date", version="1.5.0")
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.notifications(org) == []
    manual = fleet.one("SELECT notify_considered_at FROM runs WHERE trigger = 'manual'")
    assert manual["notify_considered_at"] is None


def test_the_database_refuses_to_consider_a_manual_run(fleet: Fleet) -> None:
    run_id = fleet.run(fleet.agent(fleet.org(), "web-01"), "succeeded", trigger="manual")
    with pytest.raises(psycopg.errors.CheckViolation):
        fleet.sql("UPDATE runs SET notify_considered_at = now() WHERE id = %s", [run_id])


def _slot(day: int, hour: int) -> tuple[str, datetime]:
    """The Amsterdam wall time `hour`:00 on 2026-11-`day` or 2026-12-(day-30), and its instant."""
    at = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=day - 1, hours=hour - 1)
    local = at + timedelta(hours=1)
    return f"{local:%Y-%m-%dT%H:%M}", at


def test_a_failure_is_named_once_per_agent_per_calendar_day(fleet: Fleet) -> None:
    org = fleet.org()
    flaky = fleet.agent(org, "flaky", times=["03:00", "15:00"])
    steady = fleet.agent(org, "steady", times=["03:00", "15:00"])
    named = []
    for day, hour in [(30, 3), (30, 15), (31, 3)]:
        key, at = _slot(day, hour)
        fleet.run(flaky, "failed", slot_key=key, slot_at=at, error="health check failed")
        fleet.run(steady, "succeeded", slot_key=key, slot_at=at, version="1.5.0")
        fleet.reconcile(at + timedelta(minutes=20))
        body = _notification_body(fleet, org, key)
        named.append(([f["name"] for f in body["failed"]], body["failures_already_reported_today"]))
    assert named == [(["flaky"], 0), ([], 1), (["flaky"], 0)]


def test_a_repeated_failure_alone_is_silence(fleet: Fleet) -> None:
    org = fleet.org()
    flaky = fleet.agent(org, "flaky", times=["03:00", "15:00"])
    for hour in (3, 15):
        key, at = _slot(30, hour)
        fleet.run(flaky, "failed", slot_key=key, slot_at=at, error="health check failed")
        fleet.reconcile(at + timedelta(minutes=20))
    assert [n["slot_key"] for n in fleet.notifications(org)] == ["2026-11-30T03:00"]
    assert _considered(fleet) == [True, True]


def test_an_agent_silent_for_three_days_is_named_once_a_day(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.agent(org, "silent", times=["03:00", "15:00"])  # enrolled 2026-11-30T01:00Z
    named = {}
    for day, hour in [(32, 3), (33, 3), (33, 15), (34, 3)]:
        key, at = _slot(day, hour)
        fleet.reconcile(at + timedelta(minutes=20))
        body = _notification_body(fleet, org, key)
        named[key] = [agent["name"] for agent in body["not_updated_for_three_days"]]
    assert named == {
        "2026-12-02T03:00": [],  # two days and a bit: not yet
        "2026-12-03T03:00": ["silent"],
        "2026-12-03T15:00": [],  # already named today
        "2026-12-04T03:00": ["silent"],
    }


def test_an_agent_that_consumes_a_slot_is_no_longer_silent(fleet: Fleet) -> None:
    org = fleet.org()
    agent = fleet.agent(org, "back", times=["03:00", "15:00"])
    key, at = _slot(33, 15)
    fleet.run(agent, "up_to_date", slot_key=key, slot_at=at, version="1.5.0")
    key, at = _slot(34, 3)
    fleet.reconcile(at + timedelta(minutes=20))
    body = _notification_body(fleet, org, key)
    assert body["not_updated_for_three_days"] == []


def test_the_notification_waits_for_runs_still_in_progress(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.run(fleet.agent(org, "fast"), "succeeded", version="1.5.0")
    slow = fleet.run(fleet.agent(org, "slow"), "claimed")
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.notifications(org) == []
    fleet.finish(slow, "succeeded", version="1.5.0")
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=5))
    [notification] = fleet.notifications(org)
    assert notification["body"]["counts"]["updated"] == 2


def test_a_run_that_never_reports_is_listed_after_the_grace(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.run(fleet.agent(org, "fast"), "succeeded", version="1.5.0")
    lost = fleet.run(fleet.agent(org, "lost"), "claimed")
    fleet.reconcile(NIGHT + timedelta(minutes=15 + 60 + 1))
    [notification] = fleet.notifications(org)
    assert [agent["name"] for agent in notification["body"]["no_outcome"]] == ["lost"]
    fleet.finish(lost, "failed")
    report = fleet.reconcile(NIGHT + timedelta(hours=2))
    assert report.review.late_runs_considered == 1
    assert len(fleet.notifications(org)) == 1  # still one per organisation per slot
    assert _considered(fleet) == [True, True]


def _considered_by_run(fleet: Fleet) -> dict[UUID, bool]:
    rows = fleet.rows("SELECT id, notify_considered_at FROM runs")
    return {row["id"]: row["notify_considered_at"] is not None for row in rows}


def _last_answer_change(fleet: Fleet) -> int:
    row = fleet.one("SELECT coalesce(max(id), 0) AS id FROM answer_changes")
    last: int = row["id"]
    return last


def _agents_noted_since(fleet: Fleet, last: int) -> set[UUID]:
    """The agents whose answers every worker was told to forget since `last`."""
    rows = fleet.rows(
        "SELECT DISTINCT subject FROM answer_changes WHERE id > %s AND scope = 'agent'", [last]
    )
    return {row["subject"] for row in rows}


def test_the_reviews_stamp_makes_no_worker_forget_an_agents_answers(fleet: Fleet) -> None:
    """The review stamps every finished run of the night as considered, which is in no answer an
    agent gets: noting it would make every worker of every replica forget the whole fleet's
    answers each night. The outcome that ends a run is an answer's change, and is noted."""
    org = fleet.org()
    fast, steady, lost = (fleet.agent(org, name) for name in ("fast", "steady", "lost"))
    fast_run = fleet.run(fast, "succeeded", version="1.5.0")
    steady_run = fleet.run(steady, "up_to_date", version="1.5.0")
    lost_run = fleet.run(lost, "claimed")
    before_review = _last_answer_change(fleet)
    report = fleet.reconcile(NIGHT + timedelta(minutes=15 + 60 + 1))
    assert report.review.reviewed == 1
    assert _considered_by_run(fleet) == {fast_run: True, steady_run: True, lost_run: False}
    assert _agents_noted_since(fleet, before_review) == set()

    before_outcome = _last_answer_change(fleet)
    fleet.finish(lost_run, "failed")
    assert _agents_noted_since(fleet, before_outcome) == {lost.id}

    before_late = _last_answer_change(fleet)
    report = fleet.reconcile(NIGHT + timedelta(hours=2))
    assert report.review.late_runs_considered == 1
    assert _considered_by_run(fleet) == {fast_run: True, steady_run: True, lost_run: True}
    assert _agents_noted_since(fleet, before_late) == set()


def test_a_reviewed_slots_late_runs_are_stamped_and_no_other_run(fleet: Fleet) -> None:
    """A run that ends after its slot's review is considered by the next pass; the runs the review
    stamped keep their stamp, and another organisation's run of the slot that is still open is
    not considered."""
    reviewed_at = NIGHT + timedelta(minutes=15 + 60 + 1)
    # Before the worker ends the claims that outlived their window (Globex's would then be late).
    late_at = reviewed_at + timedelta(minutes=4)
    acme, globex = fleet.org("Acme"), fleet.org("Globex")
    fast = fleet.run(fleet.agent(acme, "fast"), "succeeded", version="1.5.0")
    late = fleet.run(fleet.agent(acme, "late"), "claimed")
    other = fleet.run(fleet.agent(globex, "other"), "claimed")
    fleet.reconcile(reviewed_at)
    fleet.finish(late, "failed")
    report = fleet.reconcile(late_at)
    assert report.review.late_runs_considered == 1
    rows = fleet.rows("SELECT id, notify_considered_at FROM runs")
    assert {row["id"]: row["notify_considered_at"] for row in rows} == {
        fast: reviewed_at,
        late: late_at,
        other: None,
    }


def test_inbox_lists_and_marks_read(api: Api, fleet: Fleet, make_org, make_agent) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    fleet.run(
        FleetAgent(id=UUID(agent.agent_id), org_id=UUID(org.org_id), name="web-01"),
        "succeeded",
        version="1.5.0",
    )
    fleet.reconcile(AFTER_NIGHT)
    with api.client(org.panel_key) as client:
        inbox = client.get("/v1/notifications").json()
        assert inbox["unread"] == 1
        [item] = inbox["notifications"]
        assert item["slot_key"] == NIGHT_KEY and item["read"] is False
        assert item["summary"] == "2026-11-30 03:00: 1 agent — 1 updated to 1.5.0"
        marked = client.post(f"/v1/notifications/{item['id']}/read")
        assert marked.status_code == 200 and marked.json()["read"] is True
        assert client.get("/v1/notifications", params={"unread": "true"}).json() == {
            "unread": 0,
            "notifications": [],
        }
        again = client.post(f"/v1/notifications/{item['id']}/read", json={"read": False})
        assert again.json()["read"] is False


def test_inbox_refuses_the_wrong_caller(api: Api, fleet: Fleet, make_org, make_agent) -> None:
    org, other = make_org("Acme"), make_org("Globex")
    agent = make_agent(org, "web-01")
    fleet.reconcile(AFTER_NIGHT)  # web-01 missed: one notification for Acme
    with api.client(org.panel_key) as client:
        [item] = client.get("/v1/notifications").json()["notifications"]
    with api.client(other.panel_key) as client:
        assert client.get("/v1/notifications").json()["notifications"] == []
        refused = client.post(f"/v1/notifications/{item['id']}/read")
        assert refused.status_code == 404
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/notifications").status_code == 403
    with api.client() as client:
        assert client.get("/v1/notifications").status_code == 401


@pytest.mark.parametrize("limit", [pytest.param("0", id="zero"), pytest.param("201", id="huge")])
def test_inbox_limit_out_of_range_is_named(api: Api, make_org, limit: str) -> None:
    org = make_org("Acme")
    with api.client(org.panel_key) as client:
        response = client.get("/v1/notifications", params={"limit": limit})
    assert response.status_code == 422
    assert response.json()["detail"]["message"] == (
        f"limit: {int(limit)} is out of range (expected 1 to 200)"
    )
