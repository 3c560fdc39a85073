"""The updater's view of the agent's service: restart and health commands, deadline in product
seconds."""

from __future__ import annotations

import sys
import time

import pytest

from agent_daemon.updater.managed_service import AgentService
from ground.clock import Clock, FakeClock, SystemClock

FAST = FakeClock(start=SystemClock().now(), anchor=time.time(), speed=100.0)


def service(
    health: tuple[str, ...], restart: tuple[str, ...] = ("true",), clock: Clock = FAST
) -> AgentService:
    return AgentService(
        restart_command=restart,
        health_command=health,
        deadline_seconds=30.0,
        poll_seconds=2.0,
        clock=clock,
    )


def test_health_is_the_version_printed_as_a_word() -> None:
    # Real seconds here: a success must never race a deadline on a busy machine.
    healthy = service(("echo", "provibr-agent 1.5.0 ok"), clock=SystemClock())
    assert healthy.wait_healthy("1.5.0") is None


@pytest.mark.parametrize(
    ("health", "expected"),
    [
        pytest.param(("echo", "1.5.01"), "printed '1.5.01'", id="longer_version"),
        pytest.param(("echo", "1.4.1"), "printed '1.4.1'", id="old_version_still_running"),
        pytest.param(("false",), "exit 1", id="command_fails"),
        pytest.param(("/nonexistent/health",), "cannot run", id="command_missing"),
        pytest.param(
            (sys.executable, "-c", "import sys; print('1.5.0'); sys.exit(3)"),
            "exit 3",
            id="right_version_but_failing",
        ),
    ],
)
def test_unhealthy_until_the_product_deadline(health: tuple[str, ...], expected: str) -> None:
    problem = service(health).wait_healthy("1.5.0")
    assert problem is not None
    assert problem.startswith("not healthy within 30 s (expected the health command to report")
    assert expected in problem


def test_a_failing_restart_is_reported_with_its_output() -> None:
    problem = service(("true",), restart=("sh", "-c", "echo unit not found >&2; exit 5")).restart()
    assert (
        problem
        == "restart command 'sh -c echo unit not found >&2; exit 5' exited 5: unit not found"
    )


def test_a_successful_restart_reports_nothing() -> None:
    assert service(("true",)).restart() is None


def test_health_progress_names_the_version_it_checks() -> None:
    # After a rollback the version checked is the old one, not the release that failed.
    heard: list[tuple[str, str | None]] = []

    def progress(step: str, done: float, total: float, *, version: str | None = None) -> None:
        heard.append((step, version))

    checked = AgentService(
        restart_command=("true",),
        health_command=("echo", "1.2.0"),
        deadline_seconds=30.0,
        poll_seconds=2.0,
        clock=FAST,
        on_progress=progress,
    )
    assert checked.wait_healthy("1.3.0") is not None
    assert heard
    assert set(heard) == {("health", "1.3.0")}
