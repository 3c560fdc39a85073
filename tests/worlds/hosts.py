"""The demo's customer host (`nachtwacht.demo_world.hosts`) as the tests use it: its one-shot
`nachtwacht agent` commands forked from the fork server, and `start()`, its daemon with the
event lines a test waits for."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from ground.clock import FAKE_CLOCK_ENV
from nachtwacht.demo_world import hosts
from nachtwacht.demo_world.children import Launcher
from tests.worlds.daemons import DaemonProcess, agent_environment
from tests.worlds.processes import FORKED

__all__ = ["AgentHost"]


@dataclass
class AgentHost(hosts.AgentHost):
    launcher: Launcher = FORKED

    def start(
        self, *, fake_clock: str | None = None, extra_env: Mapping[str, str] | None = None
    ) -> DaemonProcess:
        """`agent run`, its events read as they come (for a test that waits for them)."""
        env = agent_environment(**(extra_env or {}))
        if fake_clock is not None:
            env[FAKE_CLOCK_ENV] = fake_clock
        # One file per start: a test restarts a daemon and reads each one's stderr.
        stderr_path = self.root / f"daemon-{time.monotonic_ns()}.stderr"
        return DaemonProcess.start(self.state_dir, env=env, stderr_path=stderr_path)
