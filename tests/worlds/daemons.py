"""`nachtwacht agent …` for the tests: the one-shot commands forked from the fork server, and the
daemon (`agent run`) as an interpreter of its own whose JSON event lines a test waits for.

    run_agent("status", "--state-dir", …)       # a CompletedProcess
    daemon = DaemonProcess.start(state_dir, env=agent_environment(NACHTWACHT_FAKE_CLOCK=…), …)
    daemon.wait_for("update.succeeded", slot_key="2026-11-30T03:00")
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_daemon.host.event_log import parse_line
from nachtwacht.demo_world import daemons
from nachtwacht.demo_world.children import stop_process
from tests.worlds.processes import CHECKOUT, FORKED, child_environment

__all__ = [
    "EVENT_DEADLINE_SECONDS",
    "DaemonProcess",
    "agent_environment",
    "run_agent",
]

# A deadline for a failure, never a speed assertion.
EVENT_DEADLINE_SECONDS = 120.0


def agent_environment(**extra: str) -> dict[str, str]:
    """`child_environment` with keyword settings, e.g. NACHTWACHT_FAKE_CLOCK=…"""
    return child_environment(extra)


def run_agent(*args: str, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`nachtwacht agent ARGS` to completion, forked; the caller checks the exit status."""
    return daemons.run_agent(*args, env=env, launcher=FORKED)


@dataclass
class DaemonProcess:
    """A running `nachtwacht agent run` whose stdout is read line by line as JSON events."""

    process: subprocess.Popen[bytes]
    stderr_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, state_dir: Path, *, env: dict[str, str], stderr_path: Path) -> DaemonProcess:
        with stderr_path.open("wb") as stderr:
            process = daemons.launch_daemon(
                state_dir, env=env, stdout=subprocess.PIPE, stderr=stderr, interpreters=CHECKOUT
            )
        return cls(process=process, stderr_path=stderr_path)

    def __post_init__(self) -> None:
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace")
            with self._changed:
                try:
                    self.events.append(parse_line(line))
                except ValueError:
                    self.other_lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, event: str, *, count: int = 1, **fields: object) -> dict[str, Any]:
        """The `count`-th matching event named `event`; fails after a generous deadline."""
        deadline = time.monotonic() + EVENT_DEADLINE_SECONDS
        with self._changed:
            while True:
                found = self.named(event, **fields)
                if len(found) >= count:
                    return found[count - 1]
                if self.process.poll() is not None and not self._reader.is_alive():
                    raise AssertionError(
                        f"daemon exited ({self.process.returncode}) before {event}; "
                        f"events: {self.event_names()}\nstderr: {self.stderr()}"
                    )
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"no {event} {fields} within the deadline; events: {self.event_names()}"
                        f"\nstderr: {self.stderr()}"
                    )
                self._changed.wait(min(remaining, 1.0))

    def named(self, event: str, **fields: object) -> list[dict[str, Any]]:
        with self._changed:
            return [
                e
                for e in self.events
                if e.get("event") == event and all(e.get(k) == v for k, v in fields.items())
            ]

    def event_names(self) -> list[str]:
        with self._changed:
            return [str(e.get("event")) for e in self.events]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def terminate(self) -> int:
        code = stop_process(self.process, deadline_seconds=EVENT_DEADLINE_SECONDS)
        assert code is not None
        self._close()
        return code

    def _close(self) -> None:
        self._reader.join(timeout=10)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self._close()
