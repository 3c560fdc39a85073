"""Services whose answer memory reads a change feed driven by the test, on a settable monotonic
clock: a test says when the feed is read and when the memory grows stale."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.answers_cache import AnswerMemory
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.events.trail import Actor
from control_plane.registry import Services, build_services
from control_plane.types import Pool
from ground.contract import CLAIMS_PATH
from signed_release.keys import key_id
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
OPERATOR = Actor(kind="operator", name="tests")


class Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def ticks() -> Ticks:
    return Ticks()


@pytest.fixture
def services(pool: Pool, release_key: Ed25519PrivateKey, ticks: Ticks) -> Services:
    public = release_key.public_key()
    return build_services(pool, {key_id(public): public}, answers=AnswerMemory(monotonic=ticks))


@pytest.fixture
def feed(database_url: str, services: Services, ticks: Ticks) -> Iterator[ChangeFeed]:
    """The feed, read once (the memory is live); read it again with `feed.read_once()`."""
    reader = ChangeFeed(database_url, services.answers, services.seen, monotonic=ticks)
    reader.read_once()
    assert services.answers.live
    yield reader
    reader.stop()


def claim(api: Api, agent: Agent) -> httpx.Response:
    """The agent's claim of `SLOT`."""
    with api.client(agent.agent_key) as client:
        return client.post(CLAIMS_PATH, json={"slot_key": SLOT, "from_version": "1.4.1"})


@pytest.fixture
def org_full(
    api: Api,
    services: Services,
    feed: ChangeFeed,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> tuple[Agent, Agent]:
    """03:01, org cap 1: the first agent was granted, the second refused (and remembered)."""
    services.settings.update({"org_cap": 1}, now=clock.now(), actor=OPERATOR)
    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    feed.read_once()
    org = make_org()
    first, waiting = make_agent(org, "web-01"), make_agent(org, "web-02")
    assert claim(api, first).status_code == 201
    feed.read_once()  # this worker's own grant: read back before its memory answers again
    refused = claim(api, waiting)
    assert refused.status_code == 429
    assert refused.json()["detail"]["code"] == "org_cap"
    return first, waiting
