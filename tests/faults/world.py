"""A broken night, the agent's side of an outage: the end-to-end `Night` (a real control plane
on the embedded PostgreSQL, real `nachtwacht agent run` daemons, real signed builds, managed
agents under a supervisor, one fast fake clock) with every host talking to the control plane
through a `ThrottlingProxy`, so a download can be held, cut or outlived for real.

What every fault test asserts at its end (`assert_safe`): `current` names one complete version,
no switch happened outside its window, and nothing is left running once the night is closed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_daemon.settings import render_config, write_config
from agent_daemon.updater.layout import InstallLayout
from ground.contract import parse_instant
from tests.agent_daemon.daemon_support.features import CONFIRM_ROUTE_MISSING
from tests.agent_daemon.daemon_support.night import Host, Night, NightClock, local
from tests.faults.throttling_proxy import ThrottlingProxy, throttling_proxy

__all__ = [
    "CONFIRM_ROUTE_MISSING",
    "SLOT",
    "WINDOW_CLOSES",
    "FaultNight",
    "assert_safe",
    "fault_night",
    "local",
]

SLOT = "2026-11-30T03:00"
WINDOW_CLOSES = local("2026-11-30T03:15")
# Product minutes run this many times as fast: a 15-minute window is 15 real seconds.
SPEED = 60.0


class FaultNight:
    def __init__(self, night: Night, proxy: ThrottlingProxy) -> None:
        self.night = night
        self.proxy = proxy

    def add_host(self, name: str, **fields: float | str) -> Host:
        """A host running 1.4.1, its daemon pointed at the proxy (`fields`: more agent.toml)."""
        host = self.night.add_host(name)
        rewrite_config(host.agent.state_dir / "agent.toml", control_url=self.proxy.url, **fields)
        return host

    def runs(self, host: Host) -> list[dict[str, Any]]:
        return [run for run in self.night.runs(host) if run.get("slot_key") == SLOT]

    def wait_until(self, text: str) -> None:
        self.night.clock.wait_until(local(text))


def rewrite_config(path: Path, **fields: float | str) -> None:
    """What an admin would edit in agent.toml after `agent enroll`."""
    document = tomllib.loads(path.read_text())
    document.pop("format_version", None)
    write_config(path, render_config({**document, **fields}))


@contextmanager
def fault_night(
    root: Path, start_control_plane: Any, *, start: str = "2026-11-30T02:58"
) -> Iterator[FaultNight]:
    night = Night(
        root=root,
        clock=NightClock.held(local(start), begins=root / "clock-begins", speed=SPEED),
        start_control_plane=start_control_plane,
    )
    try:
        with throttling_proxy(night.plane.base_url) as proxy:
            night.publish("1.5.0", 42)
            yield FaultNight(night, proxy)
    finally:
        night.close()
        # Nothing left running: every daemon of the night has exited.
        for host in night.hosts:
            for daemon in host.daemons:
                assert daemon.process.poll() is not None, f"{host.name}: a daemon still runs"


def switched_events(host: Host) -> list[dict[str, Any]]:
    return [e for d in host.daemons for e in d.events if e.get("event") == "swap.permitted"]


def assert_safe(host: Host, *, window_closes: datetime = WINDOW_CLOSES) -> None:
    """`current` names one complete version; no switch was permitted outside the window."""
    layout = InstallLayout(host.agent.install_root)
    assert layout.link_target("current") is not None, "current must name a complete version"
    for event in switched_events(host):
        assert parse_instant(event["at"]) < window_closes, event
