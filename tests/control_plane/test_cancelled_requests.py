"""Requests cancelled by the database's bounds are said as a lasting condition: behind a lock held
by hand every poll of an organisation's agents is answered 503, and the on-call engineer reads the
first line (naming what waited), a count once a minute, and a line when the route is served again
— not one line per request."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from control_plane.api import app as api_app
from control_plane.api.app import CancelledRequests

LOCK_TIMEOUT = psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")
STATEMENT_TIMEOUT = psycopg.errors.QueryCanceled("canceling statement due to statement timeout")
CONFIG_ROUTE = "/v1/agent/config"
AGENT_ROUTE = "/v1/agents/{agent_id}"


def _scope(route: str, method: str = "GET") -> dict[str, Any]:
    return {"type": "http", "method": method, "route": SimpleNamespace(path=route)}


def test_forty_agents_behind_one_lock_make_one_line_and_a_count_a_minute() -> None:
    seconds = [0.0]
    cancelled = CancelledRequests(60, monotonic=lambda: seconds[0])
    lines = []
    for agent in range(40):
        seconds[0] = agent * 1.5  # forty polls over a minute
        line = cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT)
        if line is not None:
            lines.append(line)
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "GET /v1/agent/config answered 503 database_unavailable: canceling statement due to"
        " lock timeout (the request connections' lock_timeout, --request-lock-timeout-seconds)"
    )
    assert "said at most every 60 s" in lines[0]
    seconds[0] = 61.0
    line = cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT)
    assert line is not None
    assert line.startswith(
        "GET /v1/agent/config: 40 more requests answered 503 database_unavailable (the request"
        " connections' lock_timeout, --request-lock-timeout-seconds) since the last line, for"
        " 61 s now"
    ), line


def test_each_route_and_bound_is_said_first_on_its_own() -> None:
    cancelled = CancelledRequests(60, monotonic=lambda: 0.0)
    path = "/v1/agents/7c1e/runs"
    first = [
        cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT),
        cancelled.cancelled("GET", _scope(AGENT_ROUTE), path, LOCK_TIMEOUT),
        cancelled.cancelled("GET", _scope(AGENT_ROUTE), path, STATEMENT_TIMEOUT),
        cancelled.cancelled("DELETE", _scope(AGENT_ROUTE), path, LOCK_TIMEOUT),
    ]
    assert all(line is not None for line in first), first
    # Another agent's request of the same route: the route's pattern, not its path, is the key.
    assert cancelled.cancelled("GET", _scope(AGENT_ROUTE), "/v1/agents/9f", LOCK_TIMEOUT) is None


def test_it_is_said_over_once_a_minute_passes_without_one_though_the_route_is_served_meanwhile(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Behind a lock on one organisation's rows, the other organisations' polls of the same route
    # are served all along: that is no end, only a minute without a cancelled request is.
    seconds = [0.0]
    cancelled = CancelledRequests(60, monotonic=lambda: seconds[0])
    with caplog.at_level(logging.WARNING, logger=api_app.__name__):
        for second in (0.0, 30.0, 70.0, 80.0):
            seconds[0] = second
            cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT)
            cancelled.quiet()  # the answers in between, of this route and others
        seconds[0] = 139.0
        cancelled.quiet()
        assert cancelled.holding
        assert caplog.records == []
        seconds[0] = 140.0
        cancelled.quiet()
        cancelled.quiet()
    assert [record.getMessage() for record in caplog.records] == [
        "GET /v1/agent/config: no request cancelled (the request connections' lock_timeout,"
        " --request-lock-timeout-seconds) for 60 s; it lasted 80 s, 1 more since the last line"
    ]
    assert not cancelled.holding
    # Met again: said at once, as a first.
    line = cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT)
    assert line is not None
    assert "answered 503 database_unavailable: canceling statement" in line
