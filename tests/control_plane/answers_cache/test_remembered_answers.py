"""The config poll and the claim's refusal from memory: exact once the feed is read, never
beyond the freshness bound, never a grant.

Each test drives the feed by hand (`feed.read_once()`) and the memory's clock (`ticks`), so
"before the feed is read" is a state the test holds, not a race.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any
from uuid import UUID

import httpx
import psycopg
import pytest

from control_plane.answers_cache import FRESHNESS_SECONDS
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.registry import Services
from ground.contract import CLAIMS_PATH, CONFIG_PATH
from tests.control_plane.answers_cache.conftest import OPERATOR, SLOT, Ticks, claim
from tests.control_plane.conftest import Agent, Api, Org
from tests.worlds.clocks import ManualClock


def _poll(api: Api, agent: Agent, etag: str | None = None, **headers: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        if etag is not None:
            headers["If-None-Match"] = etag
        return client.get(CONFIG_PATH, headers=headers)


def _revoke_agent_key(services: Services, agent: Agent, clock: ManualClock) -> None:
    (credential,) = services.accounts.list_credentials(agent_id=UUID(agent.agent_id)).credentials
    services.accounts.revoke(credential.id, now=clock.now(), actor=OPERATOR)


def _remembered_poll(api: Api, agent: Agent, services: Services) -> str:
    first = _poll(api, agent)
    assert first.status_code == 200
    assert services.answers.size() == 1  # read from the database, remembered
    return first.headers["etag"]


def test_a_revoked_credential_is_refused_once_the_feed_is_read(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    etag = _remembered_poll(api, agent, services)
    _revoke_agent_key(services, agent, clock)
    # Until the feed is read the memory may still answer: that is the documented bound.
    assert _poll(api, agent, etag).status_code == 304
    feed.read_once()
    assert _poll(api, agent, etag).status_code == 401


def test_a_stale_memory_answers_nothing(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    ticks: Ticks,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    etag = _remembered_poll(api, agent, services)
    _revoke_agent_key(services, agent, clock)
    ticks.now += FRESHNESS_SECONDS  # the feed was not read for the whole bound
    assert _poll(api, agent, etag).status_code == 401


def test_a_feed_that_cannot_be_read_stops_the_memory_at_once(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    etag = _remembered_poll(api, agent, services)
    unreachable = ChangeFeed(
        "postgresql://nobody@127.0.0.1:1/nachtwacht", services.answers, services.seen
    )
    unreachable.read_once()
    assert not services.answers.live
    _revoke_agent_key(services, agent, clock)
    assert _poll(api, agent, etag).status_code == 401


def test_a_changed_schedule_reaches_the_poll_once_the_feed_is_read(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    etag = _remembered_poll(api, agent, services)
    services.agents.set_schedule(
        UUID(org.org_id), UUID(agent.agent_id), enabled=True, times=["04:00"], now=clock.now()
    )
    assert _poll(api, agent, etag).status_code == 304
    feed.read_once()
    changed = _poll(api, agent, etag)
    assert changed.status_code == 200
    assert changed.json()["schedule"]["times"] == ["04:00"]
    assert changed.headers["etag"] != etag


def test_a_poll_from_memory_still_records_the_agent_and_its_host(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    database_url: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    _remembered_poll(api, agent, services)
    clock.set(clock.now() + timedelta(minutes=2))
    assert _poll(api, agent, **{"X-Nachtwacht-Host-Id": "host-one-1234"}).status_code == 200
    feed.read_once()  # writes what the memory noted
    with psycopg.connect(database_url, autocommit=True) as conn:
        seen = conn.execute(
            "SELECT last_seen_at FROM agents WHERE id = %s", [agent.agent_id]
        ).fetchone()
        hosts = conn.execute(
            "SELECT host_id FROM agent_hosts WHERE agent_id = %s", [agent.agent_id]
        ).fetchall()
    assert seen is not None and seen[0] == clock.now()
    assert hosts == [("host-one-1234",)]


def _refused(services: Services) -> dict[str, Any]:
    return services.refusals.refused_counts()


def test_the_refusal_comes_from_memory_until_the_feed_says_the_brake_is_on(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    org_full: tuple[Agent, Agent],
) -> None:
    _, waiting = org_full
    services.brake.set(
        engaged=True,
        reason="1.5.0 breaks TLS",
        revoke_outstanding=False,
        actor=OPERATOR,
        now=clock.now(),
    )
    before = _refused(services).get("org_cap", 0)
    # From memory (the database would say `brake`), and recorded like any refusal.
    assert claim(api, waiting).json()["detail"]["code"] == "org_cap"
    assert _refused(services)["org_cap"] == before + 1
    feed.read_once()
    braked = claim(api, waiting)
    assert braked.status_code == 503
    assert braked.json()["detail"]["code"] == "brake"


def test_the_memory_never_grants_a_round_it_has_not_seen_full(
    api: Api, clock: ManualClock, org_full: tuple[Agent, Agent]
) -> None:
    _, waiting = org_full
    assert claim(api, waiting).status_code == 429  # the round it saw full
    clock.set(clock.now() + timedelta(minutes=1))  # a new round: its counter is not known
    granted = claim(api, waiting)
    assert granted.status_code == 201  # the database's decision, not the remembered refusal


def test_the_same_claim_again_is_the_databases_answer(
    api: Api, org_full: tuple[Agent, Agent]
) -> None:
    first, _ = org_full
    again = claim(api, first)
    assert again.status_code == 200  # not a refusal from a full round it holds a token in


# -- what the hot-answer middleware leaves to the routes -------------------------------------


def test_a_config_from_memory_is_the_databases_answer_but_for_the_time(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    first = _poll(api, agent)
    clock.set(clock.now() + timedelta(seconds=5))
    again = _poll(api, agent)  # from memory, no If-None-Match: the whole config
    assert again.status_code == 200
    assert again.headers["etag"] == first.headers["etag"]
    assert again.json() == {**first.json(), "server_time": "2026-11-30T01:00:05Z"}
    assert again.headers["x-nachtwacht-server-time"] == "2026-11-30T01:00:05Z"


@pytest.mark.parametrize(
    ("request_headers", "query", "status"),
    [
        pytest.param({"X-Nachtwacht-Host-Id": "no"}, "", 422, id="malformed_host_id"),
        pytest.param({}, "?channel=Not-A-Name", 422, id="bad_channel"),
        pytest.param({"Authorization": "Basic abc"}, "", 401, id="not_a_bearer"),
    ],
)
def test_a_request_the_route_would_refuse_is_left_to_the_route(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    request_headers: dict[str, str],
    query: str,
    status: int,
) -> None:
    agent = make_agent(make_org())
    etag = _remembered_poll(api, agent, services)
    with api.client(agent.agent_key) as client:
        refused = client.get(
            CONFIG_PATH + query, headers={"If-None-Match": etag, **request_headers}
        )
    assert refused.status_code == status


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        pytest.param(
            {"slot_key": SLOT, "manual_run_id": "4f1c2a77-0000-4000-8000-000000000000"},
            "application/json",
            id="slot_and_manual_run",
        ),
        pytest.param({"slot_key": SLOT}, "text/plain", id="not_declared_json"),
        pytest.param({"slot_key": SLOT, "from_version": 1}, "application/json", id="bad_version"),
    ],
)
def test_a_claim_body_the_route_would_refuse_is_answered_as_the_route_does(
    api: Api,
    services: Services,
    org_full: tuple[Agent, Agent],
    body: dict[str, object],
    content_type: str,
) -> None:
    _, waiting = org_full

    def ask() -> httpx.Response:
        with api.client(waiting.agent_key) as client:
            return client.post(
                CLAIMS_PATH, content=json.dumps(body), headers={"Content-Type": content_type}
            )

    with_memory = ask()
    services.answers.lapse()  # now only the route can answer
    by_the_route = ask()
    assert with_memory.status_code == by_the_route.status_code
    assert with_memory.json() == by_the_route.json()


def test_a_feed_that_cannot_be_read_says_so_once_a_minute_not_twice_a_second(
    services: Services, caplog: pytest.LogCaptureFixture
) -> None:
    """A database outage: the feed is tried every half second, and each try fails. The first
    failure is said at once, then once a minute while it lasts, so the log of a few minutes'
    outage stays readable."""
    now = [0.0]
    unreachable = ChangeFeed(
        "postgresql://nobody@127.0.0.1:1/nachtwacht",
        services.answers,
        services.seen,
        monotonic=lambda: now[0],
    )
    caplog.set_level(logging.WARNING, logger="control_plane.answers_cache.feed")
    for _ in range(300):  # two and a half minutes of reads, every half second
        unreachable.read_once()
        now[0] += 0.5
    said = [r.getMessage() for r in caplog.records if "answer feed" in r.getMessage()]
    assert len(said) == 3, said
    assert said[0].startswith("answer feed not read (answers come from the database): ")
    assert said[1].startswith("answer feed still not read after 60 s")
    assert said[2].startswith("answer feed still not read after 120 s")
