"""On the spring night two wall times are one instant: in Amsterdam 02:00 does not
exist on 2027-03-28 and moves forward to 03:00, so agents scheduled at 02:00 and at 03:00 update
at the same moment — and their organisation gets one notification for it, not two."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from control_plane.reconcile.review import instant_key
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.reconcile_fleet import Fleet
from tests.worlds.clocks import ManualClock

SPRING_INSTANT = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)  # 03:00 CEST, where 02:00 CET lands
AFTER = SPRING_INSTANT + timedelta(minutes=20)
AMSTERDAM = ZoneInfo("Europe/Amsterdam")


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    clock.set(SPRING_INSTANT - timedelta(hours=2))  # enrolled that evening: no earlier slots
    made = Fleet(pool, services, clock)
    yield made
    made.close()


def test_two_labels_on_one_instant_are_one_notification(fleet: Fleet) -> None:
    org = fleet.org()
    early = fleet.agent(org, "at-0200", times=["02:00"])
    late = fleet.agent(org, "at-0300", times=["03:00"])
    fleet.run(
        early, "succeeded", slot_key="2027-03-28T02:00", slot_at=SPRING_INSTANT, version="1.5.0"
    )
    fleet.run(
        late, "succeeded", slot_key="2027-03-28T03:00", slot_at=SPRING_INSTANT, version="1.5.0"
    )
    fleet.reconcile(AFTER)
    [notification] = fleet.notifications(org)
    assert notification["slot_key"] == "2027-03-28T03:00"
    assert notification["body"]["counts"]["updated"] == 2


def test_agents_missing_both_labels_are_one_notification(fleet: Fleet) -> None:
    org = fleet.org()
    fleet.agent(org, "at-0200", times=["02:00"])
    fleet.agent(org, "at-0300", times=["03:00"])
    report = fleet.reconcile(AFTER)
    assert report.missed == 2
    [notification] = fleet.notifications(org)
    assert notification["body"]["counts"]["missed"] == 2
    assert fleet.reconcile(AFTER + timedelta(minutes=5)).review.reviewed == 0


def test_each_organisation_still_gets_its_own(fleet: Fleet) -> None:
    first, second = fleet.org("Acme"), fleet.org("Globex")
    for org in (first, second):
        agent = fleet.agent(org, "at-0200", times=["02:00"])
        fleet.run(
            agent, "succeeded", slot_key="2027-03-28T02:00", slot_at=SPRING_INSTANT, version="1.5.0"
        )
    fleet.reconcile(AFTER)
    assert len(fleet.notifications(first)) == len(fleet.notifications(second)) == 1


@pytest.mark.parametrize(
    ("instant", "key"),
    [
        pytest.param(SPRING_INSTANT, "2027-03-28T03:00", id="spring_gap_lands_at_0300"),
        pytest.param(
            datetime(2026, 10, 25, 0, 30, tzinfo=UTC), "2026-10-25T02:30", id="autumn_first_0230"
        ),
        pytest.param(
            datetime(2026, 11, 30, 2, 0, tzinfo=UTC), "2026-11-30T03:00", id="winter_0300"
        ),
    ],
)
def test_an_instant_is_named_by_its_wall_time(instant: datetime, key: str) -> None:
    assert instant_key(instant, AMSTERDAM) == key


def test_an_unauthorised_switch_is_named_like_a_failure_and_never_counted_as_updated(
    fleet: Fleet,
) -> None:
    org = fleet.org()
    agent = fleet.agent(org, "web-01", times=["03:00"])
    fleet.run(
        agent, "unauthorised", slot_key="2027-03-28T03:00", slot_at=SPRING_INSTANT, version="1.5.0"
    )
    fleet.reconcile(AFTER)
    [notification] = fleet.notifications(org)
    body = notification["body"]
    assert (body["counts"]["unauthorised"], body["counts"]["updated"]) == (1, 0)
    assert [entry["name"] for entry in body["failed"]] == ["web-01"]
    assert "1 switched without authorisation" in body["summary"]
