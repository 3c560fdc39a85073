"""Services whose answer memory reads a change feed driven by the test, on a settable monotonic
clock: a test says when the feed is read and when the memory grows stale."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.answers_cache import AnswerMemory
from control_plane.answers_cache.feed import ChangeFeed
from control_plane.registry import Services, build_services
from control_plane.types import Pool
from signed_release.keys import key_id


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
