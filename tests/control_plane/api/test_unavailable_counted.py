"""A request the database could not serve is answered 503 `database_unavailable` and counted by
cause in `/metrics` (`nachtwacht_requests_database_unavailable_total`), so a replica that turns
agents away now and then is seen by its scrapes, not only in its log."""

from __future__ import annotations

import re

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


def test_a_request_that_found_no_free_connection_is_counted_as_pool_wait(
    api: Api, pool: Pool, operator_key: str
) -> None:
    with api.client(operator_key) as client:
        before = _unavailable(client.get("/metrics").text)
        assert before == {"pool_wait": 0, "cancelled": 0, "connection": 0}
        # Every connection of the pool taken: the request waits its 3 s, then is turned away.
        taken = []
        while True:
            try:
                taken.append(pool.getconn(timeout=0.5))
            except Exception:
                break
        try:
            refused = client.get("/v1/admin/settings")
        finally:
            for conn in taken:
                pool.putconn(conn)
        assert refused.status_code == 503
        assert refused.json()["detail"]["code"] == "database_unavailable"
        after = _unavailable(client.get("/metrics").text)
    assert after == {"pool_wait": 1, "cancelled": 0, "connection": 0}
