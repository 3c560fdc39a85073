"""A host whose clock is further off than its agent follows: the config poll's `Date` header says
the host's clock, the control plane keeps the disagreement (`agent_clocks`), and a slot missed
while it lasts is `host_clock`, with the offset on its event. Agents that say nothing, clocks that
agree and hostile headers change nothing: those misses keep the reasons they had."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from unittest.mock import ANY
from uuid import UUID

import pytest

from control_plane.answers_cache.seen import SeenRecorder
from control_plane.events.trail import Actor
from control_plane.poll_word import PollWord
from control_plane.registry import Services
from control_plane.types import Pool
from ground.instants import format_http_date
from tests.control_plane.conftest import Agent, Api
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, NIGHT_KEY, Fleet

IN_THE_WINDOW = NIGHT + timedelta(minutes=3)
THREE_DAYS = timedelta(days=3)


@pytest.fixture
def in_the_window(fleet: Fleet, make_org, make_agent) -> Agent:
    """Acme's web-01, the control plane's clock three minutes into the night's window."""
    agent: Agent = make_agent(make_org("Acme"), "web-01")
    fleet.clock.set(IN_THE_WINDOW)
    return agent


@pytest.fixture
def off_before_the_window(api: Api, fleet: Fleet, make_org, make_agent) -> Agent:
    """Acme's web-01, whose poll two hours before the night said its host three days behind:
    the control plane keeps the host's clock."""
    agent: Agent = make_agent(make_org("Acme"), "web-01")
    fleet.clock.set(NIGHT - timedelta(hours=2))
    assert _poll(api, agent.agent_key, _date(NIGHT - THREE_DAYS)) == 200
    assert len(_clocks(fleet)) == 1
    return agent


def _poll(api: Api, agent_key: str, *headers: tuple[str, str]) -> int:
    with api.client(agent_key) as client:
        answer = client.get("/v1/agent/config", headers=list(headers))
    return answer.status_code


def _date(instant: datetime) -> tuple[str, str]:
    return ("Date", format_http_date(instant))


def _clocks(fleet: Fleet) -> list[tuple[UUID, int]]:
    return [
        (row["agent_id"], row["offset_seconds"])
        for row in fleet.rows("SELECT agent_id, offset_seconds FROM agent_clocks")
    ]


def _miss_event(fleet: Fleet, agent_id: str) -> dict[str, object]:
    event = fleet.one(
        "SELECT data FROM events WHERE agent_id = %s AND kind = 'update.missed'", [agent_id]
    )
    data: dict[str, object] = event["data"]
    return data


@pytest.mark.parametrize("wrong_by", [-THREE_DAYS, THREE_DAYS], ids=["behind", "ahead"])
def test_a_host_clock_days_off_misses_as_host_clock_with_its_offset(
    api: Api, fleet: Fleet, in_the_window: Agent, wrong_by: timedelta
) -> None:
    agent = in_the_window
    assert _poll(api, agent.agent_key, _date(IN_THE_WINDOW + wrong_by)) == 200
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "host_clock"}
    offset = int(wrong_by.total_seconds())
    assert _miss_event(fleet, agent.agent_id) == {
        "slot_key": NIGHT_KEY,
        "reason": "host_clock",
        "host_clock_offset_seconds": offset,
    }


def test_a_host_clock_hours_off_is_followed_by_the_agent_and_its_miss_stays_unknown(
    api: Api, fleet: Fleet, in_the_window: Agent
) -> None:
    # Within the day the agent follows, it plans on the control plane's clock: a miss is not
    # the clock's doing, and nothing is kept.
    agent = in_the_window
    assert _poll(api, agent.agent_key, _date(IN_THE_WINDOW - timedelta(hours=23))) == 200
    assert _clocks(fleet) == []
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}
    assert _miss_event(fleet, agent.agent_id) == {"slot_key": NIGHT_KEY, "reason": "unknown"}


def test_an_agent_that_says_no_time_is_served_and_keeps_the_old_reasons(
    api: Api, fleet: Fleet, make_org, make_agent
) -> None:
    # The previous release's agents send no `Date`.
    org = make_org("Acme")
    seen = make_agent(org, "web-01")
    make_agent(org, "web-02")  # never seen
    fleet.clock.set(IN_THE_WINDOW)
    assert _poll(api, seen.agent_key) == 200
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown", "web-02": "offline"}


@pytest.mark.parametrize(
    "polls",
    [
        # The host's clock was put right before the window.
        pytest.param([(_date(IN_THE_WINDOW + timedelta(seconds=2)),)], id="put_right"),
        # Still three days off; then the agent went back to the previous release, which says
        # no time: the disagreement is no one's latest word.
        pytest.param([(_date(IN_THE_WINDOW - THREE_DAYS),), ()], id="switched_back_without_date"),
    ],
)
def test_a_clock_kept_and_no_longer_said_in_the_window_leaves_the_miss_unknown(
    api: Api, fleet: Fleet, off_before_the_window: Agent, polls: list[tuple[tuple[str, str], ...]]
) -> None:
    """Tonight's miss is not the clock's doing as far as anyone can tell."""
    fleet.clock.set(IN_THE_WINDOW)
    for headers in polls:
        assert _poll(api, off_before_the_window.agent_key, *headers) == 200
    assert _clocks(fleet) == []
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


def test_an_unreadable_date_keeps_the_clock_kept(
    api: Api, fleet: Fleet, in_the_window: Agent
) -> None:
    # A `Date` sent but not read says nothing either way: what was kept stays.
    agent = in_the_window
    assert _poll(api, agent.agent_key, _date(IN_THE_WINDOW - THREE_DAYS)) == 200
    assert _poll(api, agent.agent_key, ("Date", "yesterday")) == 200
    assert _clocks(fleet) == [(UUID(agent.agent_id), -int(THREE_DAYS.total_seconds()))]


def test_a_clock_off_before_the_window_and_an_agent_gone_since_is_offline(
    fleet: Fleet, off_before_the_window: Agent
) -> None:
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "offline"}


def test_the_brake_comes_before_the_hosts_clock(
    api: Api, fleet: Fleet, services: Services, in_the_window: Agent
) -> None:
    # A braked agent would not have asked on any clock.
    services.brake.set(
        engaged=True,
        reason="incident 45",
        revoke_outstanding=True,
        actor=Actor(kind="operator", name="tests"),
        now=NIGHT - timedelta(hours=1),
    )
    assert _poll(api, in_the_window.agent_key, _date(IN_THE_WINDOW - THREE_DAYS)) == 200
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "brake"}


# Each three days off the window's 02:03 UTC (Friday 27 November) where it names a day at all, so
# a reader that took it would keep it and blame the host's clock.
HOSTILE_DATES = [
    pytest.param("not a date", id="garbage"),
    pytest.param("", id="empty"),
    pytest.param("Mon, 27 Nov 2026 02:03:00 GMT", id="weekday_not_the_days"),
    pytest.param("Tue, 31 Nov 2026 02:03:00 GMT", id="no_such_day"),
    pytest.param("Fri, 27 Nov 2026 02:03:00 CET", id="not_gmt"),
    pytest.param("Fri, 27 Nov 2026 02:03:00 +0000", id="numeric_zone"),
    pytest.param("Friday, 27-Nov-26 02:03:00 GMT", id="rfc_850"),
    pytest.param("Fri Nov 27 02:03:00 2026", id="asctime"),
    pytest.param("2026-11-27T02:03:00Z", id="rfc_3339"),
    pytest.param("Fri, 27 Nov 2026 02:03:60 GMT", id="second_60"),
    pytest.param("Fri, 27 Nov 2026 02:03:00 GMT\u00a0", id="trailing_byte"),
    pytest.param("Mon, 01 Jan 0001 00:00:00 GMT", id="year_1"),
    pytest.param("Wed, 31 Dec 1969 23:59:59 GMT", id="before_1970"),
    pytest.param("Fri, 31 Dec 9999 23:59:59 GMT", id="year_9999"),
    pytest.param("Thu, 01 Jan 1970 00:00:00 GMT " + "x" * 6000, id="huge"),
]


@pytest.mark.parametrize("value", HOSTILE_DATES)
def test_a_date_that_is_no_host_clock_is_ignored_and_the_poll_served(
    api: Api, fleet: Fleet, in_the_window: Agent, value: str
) -> None:
    with api.client(in_the_window.agent_key) as client:
        answer = client.get("/v1/agent/config", headers={"Date": value.encode("latin-1")})
    assert answer.status_code == 200, answer.text
    assert _clocks(fleet) == []
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


@pytest.mark.parametrize(
    ("second", "status"),
    [(IN_THE_WINDOW - THREE_DAYS, 200), (IN_THE_WINDOW, 422)],
    ids=["same_served", "another_refused"],
)
def test_two_dates_in_one_poll_keep_no_clock(
    api: Api, fleet: Fleet, in_the_window: Agent, second: datetime, status: int
) -> None:
    """The same `Date` twice is served and says nothing; two different ones say two things, a
    422 naming `Date` (`api.deps.said_once`)."""
    dates = (_date(IN_THE_WINDOW - THREE_DAYS), _date(second))
    assert _poll(api, in_the_window.agent_key, *dates) == status
    assert _clocks(fleet) == []


# The sightings from memory (`SeenRecorder`) of an agent whose host's clock is kept three days
# behind, as of `SIGHTED`.
SIGHTED = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)


@dataclass(frozen=True)
class Sightings:
    recorder: SeenRecorder
    agent_id: UUID
    pool: Pool

    def write(self) -> None:
        with self.pool.connection() as conn:
            self.recorder.write(conn)


@pytest.fixture
def sightings(pool: Pool, fleet: Fleet) -> Sightings:
    agent_id = UUID(str(fleet.agent(fleet.org(), "web-01").id))
    recorder = SeenRecorder(
        resolution=timedelta(seconds=30),
        host_every=timedelta(minutes=5),
        stretch_gap=timedelta(minutes=3),
    )
    kept = Sightings(recorder, agent_id, pool)
    recorder.saw(agent_id, SIGHTED, PollWord(clock=-259_200))
    kept.write()
    assert _clocks(fleet) == [(agent_id, -259_200)]
    return kept


def test_the_sightings_from_memory_keep_and_remove_a_hosts_clock(
    fleet: Fleet, sightings: Sightings
) -> None:
    recorder, agent_id = sightings.recorder, sightings.agent_id
    # Within the resolution: nothing new to write; a clock that agrees removes the row once.
    recorder.saw(agent_id, SIGHTED + timedelta(seconds=5), PollWord(clock=-259_199))
    assert recorder.pending() == 0
    recorder.saw(agent_id, SIGHTED + timedelta(minutes=1), PollWord(clock=1))
    sightings.write()
    assert _clocks(fleet) == []
    recorder.saw(agent_id, SIGHTED + timedelta(minutes=2), PollWord(clock=0))
    assert recorder.pending() == 1  # the sighting only


def test_the_sightings_from_memory_remove_a_hosts_clock_on_a_poll_without_date(
    fleet: Fleet, sightings: Sightings
) -> None:
    recorder, agent_id = sightings.recorder, sightings.agent_id
    # A claim's sighting says nothing of the clock; a poll without `Date` removes it, once.
    recorder.saw(agent_id, SIGHTED + timedelta(minutes=1))
    sightings.write()
    assert _clocks(fleet) == [(agent_id, -259_200)]
    recorder.saw(agent_id, SIGHTED + timedelta(minutes=2), PollWord(no_date=True))
    sightings.write()
    assert _clocks(fleet) == []
    recorder.saw(agent_id, SIGHTED + timedelta(minutes=3), PollWord(no_date=True))
    assert recorder.pending() == 1  # the sighting only


def test_the_notification_names_the_agent_with_its_hosts_offset(
    api: Api, fleet: Fleet, make_org, make_agent
) -> None:
    org = make_org("Acme")
    wrong = make_agent(org, "web-01")
    make_agent(org, "web-02")  # never seen
    fleet.clock.set(IN_THE_WINDOW)
    assert _poll(api, wrong.agent_key, _date(IN_THE_WINDOW - THREE_DAYS)) == 200
    fleet.reconcile(AFTER_NIGHT)
    [notification] = fleet.notifications(UUID(str(org.org_id)))
    assert notification["body"]["missed"] == [
        {
            "agent_id": str(wrong.agent_id),
            "name": "web-01",
            "reason": "host_clock",
            "host_clock_offset_seconds": -int(THREE_DAYS.total_seconds()),
        },
        {"agent_id": ANY, "name": "web-02", "reason": "offline"},
    ]
    assert notification["body"]["missed_by_reason"] == {"host_clock": 1, "offline": 1}
