"""Polls answered from memory are sightings like any other: an agent that comes back after a gap
starts a new stretch of sightings (`online_since`) and the end of the previous one is kept
(`previous_seen_at`), so the worker can tell that it was offline through a window."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import httpx
import psycopg

from control_plane.agent_config.services import STRETCH_GAP
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.registry import Services
from ground.contract import CONFIG_PATH
from ground.instants import format_http_date
from tests.control_plane.conftest import Agent, Api, Org
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, Fleet
from tests.worlds.clocks import ManualClock

START = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def _poll(api: Api, agent: Agent) -> int:
    with api.client(agent.agent_key) as client:
        answer: httpx.Response = client.get(CONFIG_PATH)
    return answer.status_code


def _stretch(database_url: str, agent: Agent) -> tuple[datetime, datetime, datetime | None]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT last_seen_at, online_since, previous_seen_at FROM agents WHERE id = %s",
            [agent.agent_id],
        ).fetchone()
    assert row is not None
    return row


def test_a_return_after_a_gap_answered_from_memory_starts_a_new_stretch(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    clock.set(START)
    for minute in range(6):
        clock.set(START + timedelta(minutes=minute))
        assert _poll(api, agent) == 200
        feed.read_once()  # writes the sightings noted from memory
    last_before_the_gap = START + timedelta(minutes=5)
    assert services.answers.size() == 1  # the polls after the first came from memory
    assert _stretch(database_url, agent) == (last_before_the_gap, START, None)

    back = last_before_the_gap + STRETCH_GAP + timedelta(minutes=5)
    clock.set(back)
    assert _poll(api, agent) == 200
    feed.read_once()

    assert _stretch(database_url, agent) == (back, back, last_before_the_gap)


def test_polls_without_a_gap_from_memory_keep_the_stretch(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    for minute in range(4):
        clock.set(START + timedelta(minutes=2 * minute))
        assert _poll(api, agent) == 200
        feed.read_once()
    assert _stretch(database_url, agent) == (START + timedelta(minutes=6), START, None)


def test_offline_through_the_window_and_back_from_memory_is_missed_as_offline(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    fleet: Fleet,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    for minute in range(-8, -2):  # six polls, the last five answered from memory
        clock.set(NIGHT + timedelta(minutes=minute))
        assert _poll(api, agent) == 200
        feed.read_once()
    assert services.answers.size() == 1
    # Down from 02:57 to 03:16: the whole window. Back before the worker's pass.
    clock.set(NIGHT + timedelta(minutes=16))
    assert _poll(api, agent) == 200
    feed.read_once()

    fleet.reconcile(AFTER_NIGHT)

    assert list(fleet.missed().values()) == ["offline"]


def _kept_clock(database_url: str, agent: Agent) -> tuple[int, datetime] | None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        return conn.execute(
            "SELECT offset_seconds, measured_at FROM agent_clocks WHERE agent_id = %s",
            [agent.agent_id],
        ).fetchone()


def test_a_hosts_clock_said_to_memory_is_kept_while_off_and_removed_once_right(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """The polls after the first are answered from memory: the host's clock they say (`Date`)
    is kept as the database's answer keeps it — off by more than a day, with when it was
    measured — and removed by the first poll whose clock is right."""
    agent = make_agent(make_org())

    def poll(host_clock: datetime) -> None:
        with api.client(agent.agent_key) as client:
            answer = client.get(CONFIG_PATH, headers={"Date": format_http_date(host_clock)})
        assert answer.status_code == 200
        feed.read_once()

    behind = timedelta(days=2)
    for minute in range(3):
        clock.set(START + timedelta(minutes=minute))
        poll(clock.now() - behind)
    assert services.answers.size() == 1
    assert _kept_clock(database_url, agent) == (
        -int(behind.total_seconds()),
        START + timedelta(minutes=2),
    )
    clock.set(START + timedelta(minutes=3))
    poll(clock.now() + timedelta(seconds=1))
    assert _kept_clock(database_url, agent) is None


def test_a_poll_from_memory_without_date_removes_the_hosts_clock_kept(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    """An agent switched back to a release that says no time (before contract 6): its polls,
    answered from memory, remove the disagreement its host's clock was kept with."""
    agent = make_agent(make_org())

    def poll(*headers: tuple[str, str]) -> None:
        with api.client(agent.agent_key) as client:
            answer = client.get(CONFIG_PATH, headers=list(headers))
        assert answer.status_code == 200
        feed.read_once()

    for minute in range(2):
        clock.set(START + timedelta(minutes=minute))
        poll(("Date", format_http_date(clock.now() - timedelta(days=2))))
    assert services.answers.size() == 1
    assert _kept_clock(database_url, agent) is not None
    clock.set(START + timedelta(minutes=2))
    poll()
    assert services.answers.size() == 1
    assert _kept_clock(database_url, agent) is None
