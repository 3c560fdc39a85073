"""`SessionService.made_once` over a real database: a form's one-use token taken while its
secret is made. The secret is made by services that take their own connection of the same pool,
so taking the token must not hold one meanwhile: with a pool of one connection (`--pool-size 1`)
every secret form of the panel waited for itself and answered 503."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from control_plane.accounts.sessions import SessionService
from control_plane.database import open_pool
from control_plane.types import Pool

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
TOKEN = "t" * 32


@pytest.fixture
def one_connection(database_url: str) -> Iterator[Pool]:
    pool = open_pool(database_url, min_size=1, max_size=1, timeout=2)
    try:
        yield pool
    finally:
        pool.close()


def _made_in(pool: Pool, what: str) -> str:
    """A secret made as the services make one: on a connection of their own from the pool."""
    with pool.connection() as conn:
        row = conn.execute("SELECT %s AS made", [what]).fetchone()
    assert row is not None
    return str(row["made"])


def test_a_secret_is_made_with_a_pool_of_one_connection(one_connection: Pool) -> None:
    sessions = SessionService(one_connection)
    made = sessions.made_once(TOKEN, lambda: _made_in(one_connection, "key"), now=NOW)
    assert made == "key"
    assert sessions.made_once(TOKEN, lambda: _made_in(one_connection, "again"), now=NOW) is None


def test_a_refused_form_leaves_its_token_to_be_sent_again(one_connection: Pool) -> None:
    sessions = SessionService(one_connection)

    def refused() -> str:
        _made_in(one_connection, "checked")
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        sessions.made_once(TOKEN, refused, now=NOW)
    assert sessions.made_once(TOKEN, lambda: _made_in(one_connection, "key"), now=NOW) == "key"


def test_the_second_sending_waits_for_the_first_and_makes_nothing(database_url: str) -> None:
    pool = open_pool(database_url, min_size=1, max_size=2, timeout=5)
    try:
        sessions = SessionService(pool)
        making = threading.Event()
        finish = threading.Event()
        made: list[str] = []

        def slow() -> str:
            making.set()
            finish.wait(timeout=30)
            made.append("first")
            return _made_in(pool, "first")

        first: list[str | None] = []
        thread = threading.Thread(
            target=lambda: first.append(sessions.made_once(TOKEN, slow, now=NOW))
        )
        thread.start()
        assert making.wait(timeout=30)
        second: list[str | None] = []
        other = threading.Thread(
            target=lambda: second.append(
                sessions.made_once(TOKEN, lambda: _made_in(pool, "second"), now=NOW)
            )
        )
        other.start()
        finish.set()
        thread.join(timeout=30)
        other.join(timeout=30)
        assert (first, second, made) == (["first"], [None], ["first"])
    finally:
        pool.close()


def test_the_second_sending_of_a_refused_form_is_refused_too(database_url: str) -> None:
    pool = open_pool(database_url, min_size=1, max_size=2, timeout=5)
    try:
        sessions = SessionService(pool)
        making = threading.Event()
        finish = threading.Event()

        def refused_slowly() -> str:
            making.set()
            finish.wait(timeout=30)
            raise ValueError("refused")

        outcomes: list[object] = []

        def send(make: object) -> None:
            try:
                outcomes.append(sessions.made_once(TOKEN, make, now=NOW))  # type: ignore[arg-type]
            except ValueError as exc:
                outcomes.append(str(exc))

        thread = threading.Thread(target=send, args=(refused_slowly,))
        thread.start()
        assert making.wait(timeout=30)

        def refused_again() -> str:
            raise ValueError("refused")

        other = threading.Thread(target=send, args=(refused_again,))
        other.start()
        finish.set()
        thread.join(timeout=30)
        other.join(timeout=30)
        assert outcomes == ["refused", "refused"]
    finally:
        pool.close()
