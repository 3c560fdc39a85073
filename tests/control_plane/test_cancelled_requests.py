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


def test_a_route_answered_again_is_said_once_and_its_next_cancel_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seconds = [0.0]
    cancelled = CancelledRequests(60, monotonic=lambda: seconds[0])
    assert cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT)
    assert cancelled.holding
    seconds[0] = 95.0
    with caplog.at_level(logging.WARNING, logger=api_app.__name__):
        cancelled.answered(_scope(AGENT_ROUTE))  # another route: nothing to say
        cancelled.answered({"type": "http", "method": "GET"})  # answered from memory
        assert caplog.records == []
        cancelled.answered(_scope(CONFIG_ROUTE))
        cancelled.answered(_scope(CONFIG_ROUTE))
    assert [record.getMessage() for record in caplog.records] == [
        "GET /v1/agent/config answered again, after 95 s of requests cancelled (the request"
        " connections' lock_timeout, --request-lock-timeout-seconds)"
    ]
    assert not cancelled.holding
    assert cancelled.cancelled("GET", _scope(CONFIG_ROUTE), CONFIG_ROUTE, LOCK_TIMEOUT)
