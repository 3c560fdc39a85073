"""What the control plane recorded of a fault night, read through the panel's API, and the checks
every fault test ends with beside `assert_safe`: one run for the slot (no slot ran twice), its
status and reason, and the timeline's events of that run.
"""

from __future__ import annotations

from typing import Any

from tests.agent_daemon.daemon_support.night import Host
from tests.faults.world import SLOT, FaultNight, local
from tests.worlds.waiting import wait_until

__all__ = ["WIDE_WINDOW_CLOSES", "run_events", "the_one_run", "wait_for_run", "widen_window"]

# The catch-up window of a night that must outlive an outage and still switch inside it: 45
# product minutes are 45 real seconds at the fault nights' speed, room for a PostgreSQL or a
# control plane to stop and start on a busy machine.
WIDE_WINDOW_MINUTES = 45
WIDE_WINDOW_CLOSES = local("2026-11-30T03:45")

# A deadline for a failure, not a speed expectation.
_DEADLINE_SECONDS = 120.0


def widen_window(night: FaultNight) -> None:
    """The platform's catch-up window set to `WIDE_WINDOW_MINUTES` by an operator, before any
    host polls its config."""
    answer = night.night.operator.put(
        "/v1/admin/settings", json={"catch_up_minutes": WIDE_WINDOW_MINUTES}
    )
    assert answer.status_code == 200, answer.text


def the_one_run(night: FaultNight, host: Host) -> dict[str, Any]:
    """The slot's only run row: a second one would mean the slot ran twice."""
    runs = night.runs(host)
    assert len(runs) == 1, f"{host.name}: {len(runs)} runs for {SLOT}: {runs}"
    return runs[0]


def wait_for_run(night: FaultNight, host: Host, status: str) -> dict[str, Any]:
    """The slot's run once the control plane records `status` for it (reports may wait in the
    outbox for a minute or two)."""
    run: dict[str, Any] = {}

    def recorded() -> dict[str, Any] | None:
        nonlocal run
        run = the_one_run(night, host)
        return run if run["status"] == status else None

    return wait_until(
        recorded,
        what=lambda: f"{host.name}: the run stayed {run}",
        timeout=_DEADLINE_SECONDS,
        interval=0.2,
    )


def run_events(night: FaultNight, host: Host, run_id: str) -> list[tuple[str, str | None]]:
    """The timeline's events about one run, oldest first: each its kind and its reason."""
    answer = night.night.panel.get(f"/v1/agents/{host.agent_id}/events")
    assert answer.status_code == 200, answer.text
    events = [e for e in answer.json()["events"] if e.get("run_id") == run_id]
    return [
        (str(e["kind"]), e["data"].get("reason"))
        for e in sorted(events, key=lambda e: (e["at"], e["id"]))
    ]
