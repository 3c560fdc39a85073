"""A replica's next answer sees its own writes: what a request to this replica wrote is honoured
by the next request it answers, before any read of the change feed (the feed is never read here
after the set-up: only the other replicas need it)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from datetime import UTC, datetime
from uuid import UUID

import httpx
import pytest

from control_plane.answers_cache import AnswerMemory, Changes, ReplicaWrites
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.registry import Services
from ground.contract import CLAIMS_PATH, CONFIG_PATH, RUNS_PATH
from tests.control_plane.answers_cache.conftest import SLOT, Ticks, claim
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock


def _code(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["detail"]["code"]


@pytest.fixture
def remembered_refusal(services: Services, api: Api, org_full: tuple[Agent, Agent]) -> Agent:
    """03:01, org cap 1, the round full: the second agent's claim is refused from memory."""
    _, waiting = org_full
    before = services.refusals.refused_counts()["org_cap"]
    assert _code(claim(api, waiting)) == (429, "org_cap")
    assert services.answers.live and services.answers.size() > 0
    assert services.refusals.refused_counts()["org_cap"] == before + 1
    return waiting


def test_a_claim_after_this_replica_recorded_up_to_date_is_slot_consumed(
    api: Api, remembered_refusal: Agent
) -> None:
    waiting = remembered_refusal
    with api.client(waiting.agent_key) as client:
        reported = client.post(
            RUNS_PATH, json={"slot_key": SLOT, "status": "up_to_date", "version": "1.5.0"}
        )
    assert reported.status_code == 201
    assert _code(claim(api, waiting)) == (409, "slot_consumed")


def test_a_claim_after_this_replica_engaged_the_brake_is_refused_by_the_brake(
    api: Api, operator_key: str, remembered_refusal: Agent
) -> None:
    waiting = remembered_refusal
    with api.client(operator_key) as operator:
        engaged = operator.put(
            "/v1/admin/brake", json={"engaged": True, "reason": "1.5.0 breaks TLS"}
        )
    assert engaged.status_code == 200
    assert _code(claim(api, waiting)) == (503, "brake")


def test_a_poll_after_this_replica_changed_the_schedule_shows_it(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    with api.client(agent.agent_key) as client:
        etag = client.get(CONFIG_PATH).headers["etag"]
        assert client.get(CONFIG_PATH, headers={"If-None-Match": etag}).status_code == 304
    assert services.answers.size() == 1
    with api.client(org.panel_key) as panel:
        changed = panel.put(
            f"/v1/agents/{UUID(agent.agent_id)}/schedule",
            json={"enabled": True, "times": ["04:00"]},
        )
    assert changed.status_code == 200, changed.text
    with api.client(agent.agent_key) as client:
        polled = client.get(CONFIG_PATH, headers={"If-None-Match": etag})
    assert polled.status_code == 200
    assert polled.json()["schedule"]["times"] == ["04:00"]


def test_a_refused_claim_does_not_stop_the_memory_answering(
    api: Api, services: Services, remembered_refusal: Agent
) -> None:
    # A refusal writes nothing that changes an answer: the next one still comes from memory.
    waiting = remembered_refusal
    assert _code(claim(api, waiting)) == (429, "org_cap")
    assert services.answers.live


def test_a_write_counted_by_one_forked_worker_is_seen_by_the_others() -> None:
    writes = ReplicaWrites()
    # The child only stores and exits (no lock it could inherit held); Python 3.12 warns about
    # any fork of a process with threads, as earlier tests may have left some.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        writes.note()
        os._exit(0)
    os.waitpid(child, 0)
    assert writes.count() == 1


def test_the_memory_answers_again_once_a_read_began_after_the_write() -> None:
    ticks = Ticks()
    memory = AnswerMemory(monotonic=ticks)
    memory.apply(Changes(), read_started=ticks.now, writes_before=memory.writes.count())
    agent, org = UUID(int=1), UUID(int=2)
    assert memory.remember("answer", 42, agent_id=agent, org_id=org, stamp=memory.stamp())
    counted_before_the_read = memory.writes.count()

    memory.writes.note()
    assert memory.recall("answer") is None
    assert not memory.live
    # A read that began before the write was counted does not cover it.
    memory.apply(Changes(), read_started=ticks.now, writes_before=counted_before_the_read)
    assert memory.recall("answer") is None

    memory.apply(Changes(), read_started=ticks.now, writes_before=memory.writes.count())
    assert memory.recall("answer") == 42


def test_a_poll_after_an_outcome_recorded_as_unauthorised_shows_no_pending_update(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    # The outcome answered 409 was still written (the run recorded as unauthorised, committed
    # before the refusal): the manual update it ended must leave the agent's next poll at once.
    clock.set(datetime(2026, 11, 30, 10, 0, tzinfo=UTC))
    org = make_org()
    agent = make_agent(org)
    with api.client(org.panel_key) as panel:
        requested = panel.post(f"/v1/agents/{agent.agent_id}/update")
    assert requested.status_code in (200, 202), requested.text
    run_id = requested.json()["run_id"]
    with api.client(agent.agent_key) as client:
        granted = client.post(CLAIMS_PATH, json={"manual_run_id": run_id})
        assert granted.status_code == 201, granted.text
        feed.read_once()
        assert client.get(CONFIG_PATH).json()["manual_update"]["run_id"] == run_id
        assert services.answers.size() == 1
        clock.set(datetime(2026, 11, 30, 11, 30, tzinfo=UTC))  # the token expired at 11:00
        late = client.patch(
            f"{RUNS_PATH}/{run_id}", json={"status": "succeeded", "version": "1.5.0"}
        )
        assert _code(late) == (409, "outcome_not_authorised")
        assert client.get(CONFIG_PATH).json()["manual_update"] is None


def test_a_claim_after_this_replica_recorded_an_outcome_is_slot_consumed(
    api: Api, services: Services, feed: ChangeFeed, org_full: tuple[Agent, Agent]
) -> None:
    # The granted agent's run ends; the feed has been read since its grant, so the memory is
    # live and remembers the round: its next claim must still see the run's end at once.
    first, _ = org_full
    granted = claim(api, first)
    assert granted.status_code == 200, granted.text
    feed.read_once()
    assert services.answers.live
    with api.client(first.agent_key) as client:
        ended = client.patch(
            f"{RUNS_PATH}/{granted.json()['run_id']}",
            json={"status": "failed", "version": "1.4.1", "reason": "window_closed"},
        )
    assert ended.status_code == 200, ended.text
    assert _code(claim(api, first)) == (409, "slot_consumed")
