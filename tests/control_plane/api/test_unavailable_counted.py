"""A request the database could not serve is answered 503 `database_unavailable` and counted by
cause in `/metrics` (`nachtwacht_requests_database_unavailable_total`), so a replica that turns
agents away now and then is seen by its scrapes, not only in its log."""

from __future__ import annotations

import logging
import re

import pytest
from psycopg_pool import PoolTimeout

from control_plane.types import Pool
from tests.control_plane.conftest import Api


def _unavailable(text: str) -> dict[str, int]:
    return {
        cause: int(float(count))
        for cause, count in re.findall(
            r'^nachtwacht_requests_database_unavailable_total\{cause="([a-z_]+)",'
            r'replica="[^"]*"\} (\S+)$',
            text,
            re.MULTILINE,
        )
    }


def test_requests_that_found_no_free_connection_are_counted_and_said_once(
    api: Api, pool: Pool, operator_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    with api.client(operator_key) as client:
        before = _unavailable(client.get("/metrics").text)
        assert before == {"pool_wait": 0, "cancelled": 0, "connection": 0}
        # Every connection of the pool taken: the request waits its 3 s, then is turned away.
        taken = []
        while True:
            try:
                taken.append(pool.getconn(timeout=0.5))
            except PoolTimeout:  # the pool is empty
                break
        caplog.set_level(logging.ERROR, logger="control_plane.api.app")
        try:
            refused = [client.get("/v1/admin/settings") for _ in range(3)]
        finally:
            for conn in taken:
                pool.putconn(conn)
        assert [answer.status_code for answer in refused] == [503] * 3
        assert {answer.json()["detail"]["code"] for answer in refused} == {"database_unavailable"}
        after = _unavailable(client.get("/metrics").text)
    assert after == {"pool_wait": 3, "cancelled": 0, "connection": 0}
    # Said once, with where the rest are counted: every agent of a night would meet it.
    said = [r.getMessage() for r in caplog.records if "database_unavailable" in r.getMessage()]
    assert len(said) == 1, said
    assert said[0].startswith(
        "GET /v1/admin/settings answered 503 database_unavailable (pool_wait)"
    )
    assert "nachtwacht_requests_database_unavailable_total" in said[0]
