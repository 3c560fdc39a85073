"""A claim that waits for the grant already in flight in its worker, over the real routes and
database (`answers_cache.in_flight`): granted when that grant fails with room left, refused when it
filled the round — never refused while the caps would grant it.

The grant ahead is held up inside the database: another transaction holds the row its first
check writes (the agent's pair, `agent_tracks`), and decides, by committing a hold of that agent
or by rolling back, whether it then fails or is granted.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import httpx
import psycopg
import pytest
from starlette.types import Message, Receive, Scope, Send

from control_plane.answers_cache.feed import ChangeFeed
from control_plane.answers_cache.hot_answers import HotAnswers
from control_plane.api.hot_calls import ServicesFromMemory
from control_plane.claims.caps import round_start
from control_plane.events.trail import Actor
from control_plane.registry import Services
from ground.contract import CLAIMS_PATH
from tests.control_plane.answers_cache.test_full_rounds import IN_THE_WINDOW, SLOT
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.control_plane.lock_waits import wait_for_a_lock_wait
from tests.worlds.clocks import ManualClock
from tests.worlds.waiting import wait_until

OPERATOR = Actor(kind="operator", name="tests")
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def _claim(api: Api, agent: Agent) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(CLAIMS_PATH, json={"slot_key": SLOT, "from_version": "1.4.1"})


def _hold(conn: psycopg.Connection[tuple[object, ...]], agent: Agent) -> None:
    conn.execute(
        "INSERT INTO holds (agent_id, until, reason, set_by, set_at)"
        " VALUES (%s, %s, 'tests', 'operator', %s)",
        [agent.agent_id, IN_THE_WINDOW + timedelta(days=1), IN_THE_WINDOW - timedelta(hours=1)],
    )


@pytest.fixture
def agents(
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    api: Api,
    database_url: str,
) -> tuple[Agent, Agent]:
    """Room for one grant a round; two agents whose facts this worker remembers (a third, held,
    agent's claim warmed the slot up)."""
    services.settings.update({"org_cap": 1, "global_cap": 1}, now=clock.now(), actor=OPERATOR)
    clock.set(IN_THE_WINDOW)
    feed.read_once()
    warmer, ahead, behind = (make_agent(make_org(name)) for name in ("Zero", "First", "Second"))
    with psycopg.connect(database_url, autocommit=True) as conn:
        _hold(conn, warmer)
    feed.read_once()  # the agents' enrolment: read before the warm-up, which it would spoil
    assert _claim(api, warmer).json()["detail"]["code"] == "held"
    feed.read_once()  # the held claim recorded the warmer's slot consumed: this worker reads it
    assert services.answers.size() == 2  # the two agents' facts, warmed up by that claim
    return ahead, behind


class Claiming:
    """A claim sent from its own thread; its answer once `join`ed."""

    def __init__(self, api: Api, agent: Agent) -> None:
        self.answer: httpx.Response | None = None
        self._thread = threading.Thread(target=self._send, args=(api, agent))
        self._thread.start()

    def _send(self, api: Api, agent: Agent) -> None:
        self.answer = _claim(api, agent)

    def join(self) -> httpx.Response:
        self._thread.join()
        assert self.answer is not None
        return self.answer


def _until(condition: Callable[[], bool], what: str) -> None:
    wait_until(condition, what=what, timeout=60, interval=0.01)


@pytest.fixture
def held_up(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url) as conn:
        yield conn


def _one_behind_the_other(
    api: Api,
    services: Services,
    database_url: str,
    agents: tuple[Agent, Agent],
    held_up: psycopg.Connection[tuple[object, ...]],
) -> tuple[Claiming, Claiming]:
    ahead, behind = agents
    held_up.execute(
        "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
        " VALUES (%s, 'stable', 'linux-x86_64', %s)",
        [ahead.agent_id, IN_THE_WINDOW],
    )
    first = Claiming(api, ahead)
    wait_for_a_lock_wait(database_url)
    second = Claiming(api, behind)
    grants = services.claims.grants_in_flight
    _until(lambda: grants.waiting() == 1, "the second claim to wait for the grant ahead")
    return first, second


def test_a_waiting_claim_is_granted_when_the_grant_ahead_of_it_fails(
    api: Api,
    services: Services,
    database_url: str,
    agents: tuple[Agent, Agent],
    held_up: psycopg.Connection[tuple[object, ...]],
) -> None:
    first, second = _one_behind_the_other(api, services, database_url, agents, held_up)
    # Past its facts (read before this): the claim ahead finds its slot taken by a run written
    # meanwhile — no grant, the room is left.
    held_up.execute(
        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, created_at)"
        " SELECT id, org_id, 'schedule', %s, %s, 'up_to_date', %s FROM agents WHERE id = %s",
        [SLOT, SLOT_AT, IN_THE_WINDOW, agents[0].agent_id],
    )
    held_up.commit()
    assert first.join().json()["detail"]["code"] == "slot_consumed"
    assert second.join().status_code == 201


def test_a_waiting_claim_is_refused_when_the_grant_ahead_of_it_filled_the_round(
    api: Api,
    services: Services,
    database_url: str,
    agents: tuple[Agent, Agent],
    held_up: psycopg.Connection[tuple[object, ...]],
) -> None:
    first, second = _one_behind_the_other(api, services, database_url, agents, held_up)
    held_up.rollback()  # the claim ahead goes on and takes the round's one place
    assert first.join().status_code == 201
    refused = second.join()
    assert (refused.status_code, refused.json()["detail"]["code"]) == (429, "global_cap")
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM tokens").fetchone() == (1,)


def test_a_claim_that_waits_and_is_refused_never_reaches_the_routes(
    services: Services, clock: ManualClock, agents: tuple[Agent, Agent]
) -> None:
    """The wait is in the hot-answer middleware, before FastAPI: a claim that waited for the
    grant ahead of it and is then refused from memory costs no routing, no dependencies and no
    database thread. (The application behind the middleware here stands in for the routes, to
    count what reaches them; the test above runs the same through the real ones.)"""
    ahead, behind = agents
    now = clock.now()
    routed: list[bytes] = []

    async def scenario() -> list[Message]:
        granting = asyncio.Event()

        async def routes(scope: Scope, receive: Receive, send: Send) -> None:
            routed.append((await receive())["body"])
            await granting.wait()
            # What the grant ahead leaves in this worker's memory: the round's one place taken.
            services.answers.note_granted(round_start(now), None, 1)
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        middleware = HotAnswers(routes, ServicesFromMemory(services))

        async def claim(agent: Agent) -> list[Message]:
            body = json.dumps({"slot_key": SLOT, "from_version": "1.4.1"}).encode()
            sent: list[Message] = []

            async def receive() -> Message:
                return {"type": "http.request", "body": body, "more_body": False}

            async def send(message: Message) -> None:
                sent.append(message)

            scope = {
                "type": "http",
                "method": "POST",
                "path": CLAIMS_PATH,
                "query_string": b"",
                "headers": [
                    (b"authorization", f"Bearer {agent.agent_key}".encode()),
                    (b"content-type", b"application/json"),
                ],
                "state": {"now": now},
            }
            await middleware(scope, receive, send)
            return sent

        first = asyncio.create_task(claim(ahead))
        while not routed:
            await asyncio.sleep(0)
        second = asyncio.create_task(claim(behind))
        while services.claims.grants_in_flight.waiting() != 1:
            await asyncio.sleep(0)
        granting.set()
        assert (await first)[0]["status"] == 201
        return await second

    # Bounded: a claim that did not wait here would leave the loops above spinning.
    refused = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    assert refused[0]["status"] == 429
    assert json.loads(refused[1]["body"])["detail"]["code"] == "global_cap"
    assert len(routed) == 1  # only the claim let through
    assert services.claims.grants_in_flight.waiting() == 0
