"""The agent's log lines as journald reads them: a `<N>` priority prefix, a monotonic stamp that
never runs backwards, and the server's time as a field of its own."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.host.event_log import EventLog, parse_line

UNIT = Path(__file__).resolve().parents[3] / "packaging/systemd/nachtwacht-agent.service"


@pytest.mark.parametrize(
    ("level", "prefix"),
    [
        pytest.param("info", "<6>", id="info_is_priority_6"),
        pytest.param("warning", "<4>", id="warning_is_priority_4"),
        pytest.param("error", "<3>", id="error_is_priority_3"),
    ],
)
def test_each_line_carries_its_syslog_priority(level: str, prefix: str) -> None:
    stream = io.StringIO()
    EventLog(now=lambda: datetime(2026, 11, 30, 3, 0, tzinfo=UTC), stream=stream).emit(
        "control_plane.offline",
        level=level,  # type: ignore[arg-type]
        error="x",
    )
    line = stream.getvalue()
    assert line.startswith(prefix + "{")
    assert parse_line(line.strip())["level"] == level


def test_the_monotonic_stamp_orders_lines_while_the_server_time_steps_back() -> None:
    # The agent learns a better offset from an answer: its estimate of the server's time jumps
    # back 40 s. The line order must not depend on that estimate.
    server_times = iter(
        [datetime(2026, 11, 30, 3, 0, 30, tzinfo=UTC), datetime(2026, 11, 30, 3, 0, tzinfo=UTC)]
    )
    ticks = iter([100.0, 100.5])
    stream = io.StringIO()
    log = EventLog(now=lambda: next(server_times), stream=stream, monotonic=lambda: next(ticks))
    log.emit("config.synced")
    log.emit("claim.granted")
    first, second = (parse_line(text) for text in stream.getvalue().splitlines())
    assert "ts" not in first
    assert float(str(second["mono"])) > float(str(first["mono"]))
    assert datetime.fromisoformat(str(second["server_time"])) - datetime.fromisoformat(
        str(first["server_time"])
    ) == timedelta(seconds=-30)


def test_a_prefix_that_contradicts_the_level_is_refused() -> None:
    with pytest.raises(ValueError, match="priority <6> does not match level 'error'"):
        parse_line('<6>{"level": "error", "event": "tick.failed"}')


def test_the_unit_lets_journald_read_the_prefix() -> None:
    lines = [line.strip() for line in UNIT.read_text().splitlines()]
    assert "SyslogLevelPrefix=true" in lines
    assert not any(line.startswith("StandardOutput=") for line in lines), (
        "stdout must stay the journal for the prefix to mean anything"
    )
