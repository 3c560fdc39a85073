"""Trust roots and the answers kept in memory: a published root reaches polls answered from
memory once the feed is read, and the root an agent reports with a poll from memory is written
with the sightings' batch — only when it changed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import httpx
import psycopg

from control_plane.answers_cache.feed import ChangeFeed
from control_plane.registry import Services
from ground.contract import CONFIG_PATH, TRUST_ROOT_VERSION_HEADER
from tests.control_plane.answers_cache.conftest import OPERATOR
from tests.control_plane.conftest import Agent, Api, Org
from tests.control_plane.root_chain import RootChain
from tests.worlds.clocks import ManualClock


def _poll(api: Api, agent: Agent, held: str | None = None) -> httpx.Response:
    headers = {} if held is None else {TRUST_ROOT_VERSION_HEADER: held}
    with api.client(agent.agent_key) as client:
        answer = client.get(CONFIG_PATH, headers=headers)
    assert answer.status_code == 200
    return answer


def _held(database_url: str, agent: Agent) -> int | None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT trust_root_version FROM agents WHERE id = %s", [agent.agent_id]
        ).fetchone()
    assert row is not None
    held: int | None = row[0]
    return held


def _changes_of(database_url: str, agent: Agent) -> int:
    with psycopg.connect(database_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM answer_changes WHERE subject = %s", [agent.agent_id]
        ).fetchone()
    assert row is not None
    count: int = row[0]
    return count


def test_a_published_root_reaches_a_poll_answered_from_memory(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    feed.read_once()  # the enrolment is a change too: read it before anything is remembered
    assert _poll(api, agent).json()["trust_root_version"] is None  # read, and remembered
    assert services.answers.size() == 1
    # Published behind this replica's back (another replica): only the feed can tell.
    services.trust_roots.publish(RootChain().v1, now=clock.now(), actor=OPERATOR)
    assert _poll(api, agent).json()["trust_root_version"] is None  # still the memory's answer
    feed.read_once()
    assert _poll(api, agent).json()["trust_root_version"] == 1


def test_the_root_reported_with_a_poll_from_memory_is_written_with_the_batch(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    feed.read_once()  # the enrolment is a change too: read it before anything is remembered
    _poll(api, agent, held="1")  # from the database: written by the poll's own statement
    assert _held(database_url, agent) == 1
    assert services.answers.size() == 1
    clock.set(clock.now() + timedelta(seconds=5))
    _poll(api, agent, held="2")  # from memory: noted, not written yet
    assert _held(database_url, agent) == 1
    changes = _changes_of(database_url, agent)
    feed.read_once()
    assert _held(database_url, agent) == 2
    # Which root an agent holds is in no answer: its write forgets nothing.
    assert _changes_of(database_url, agent) == changes
    assert services.answers.size() == 1


def test_a_fleet_that_keeps_its_root_costs_no_write(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    feed.read_once()  # the enrolment is a change too: read it before anything is remembered
    _poll(api, agent, held="3")
    feed.read_once()
    for _ in range(3):  # within the sightings' resolution: nothing else to write
        clock.set(clock.now() + timedelta(seconds=5))
        _poll(api, agent, held="3")
        assert services.seen.pending() == 0
