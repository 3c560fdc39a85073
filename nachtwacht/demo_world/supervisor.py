"""A stand-in for systemd's `Restart=always` unit of each host's managed agent service.

One thread keeps every registered service running as `<install_root>/current/bin/provibr-agent
run --heartbeat <heartbeat>`, resolving `current` at every start, so a restart runs whatever the
updater switched to. The updater's restart command is `touch <restart_request>` (any process may
run it, the updater's own crash-test child included): the supervisor then stops the service and
starts it again; it also starts it again whenever it exits. Every start is counted with its
reason (`starts`), so a report can explain each one: a service that exits on its own is a defect
until shown otherwise.
"""

from __future__ import annotations

import subprocess
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from nachtwacht.demo_world.children import STOP_DEADLINE_SECONDS, stop_process

__all__ = [
    "START_AFTER_EXIT",
    "START_FIRST",
    "START_REQUESTED",
    "START_REQUESTED_AFTER_FIRST",
    "ManagedService",
    "ServiceSupervisor",
]

# Why a service was started (`ServiceSupervisor.starts`).
START_FIRST = "first start"
# The updater's restart command while the service ran: the old process stopped, the new started.
START_REQUESTED = "restart requested"
# The first restart request of a service the supervisor had already started from the `current`
# the installer had just switched, before its request arrived (it polls, like Restart=always).
START_REQUESTED_AFTER_FIRST = "restart requested just after its first start"
START_AFTER_EXIT = "started again after it exited on its own"


class ManagedService(Protocol):
    """Where a host keeps its managed agent (`hosts.AgentHost` is one)."""

    @property
    def install_root(self) -> Path: ...

    @property
    def heartbeat(self) -> Path: ...

    @property
    def restart_request(self) -> Path: ...


@dataclass
class _Unit:
    service: ManagedService
    running: subprocess.Popen[bytes] | None = None
    stopping: subprocess.Popen[bytes] | None = None
    next_reason: str = START_FIRST
    requests: int = 0
    exit_codes: list[int] = field(default_factory=list)


@dataclass
class ServiceSupervisor:
    """Keeps every registered host's managed agent running from `current`; restarts on request."""

    poll_seconds: float = 0.05
    restarts: int = 0
    starts: Counter[str] = field(default_factory=Counter)
    _units: list[_Unit] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, service: ManagedService) -> None:
        with self._lock:
            self._units.append(_Unit(service))

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="service-supervisor", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                for unit in self._units:
                    self._supervise(unit)
            self._stop.wait(self.poll_seconds)

    def _supervise(self, unit: _Unit) -> None:
        service = unit.service
        if service.restart_request.exists():
            service.restart_request.unlink(missing_ok=True)
            if unit.running is not None and unit.running.poll() is None:
                # Never wait here: one slow stop must not hold up the other hosts' services.
                unit.running.terminate()
                unit.stopping = unit.running
                unit.next_reason = (
                    START_REQUESTED_AFTER_FIRST if unit.requests == 0 else START_REQUESTED
                )
            unit.requests += 1
            unit.running = None
        if unit.stopping is not None:
            if unit.stopping.poll() is None:
                return
            unit.stopping = None
        if unit.running is not None and (code := unit.running.poll()) is not None:
            unit.running = None  # it exited: start it again, like Restart=always
            unit.exit_codes.append(code)
            unit.next_reason = f"{START_AFTER_EXIT} (exit {code})"
        program = service.install_root / "current" / "bin" / "provibr-agent"
        if unit.running is None and program.exists():
            unit.running = subprocess.Popen(
                [str(program), "run", "--heartbeat", str(service.heartbeat)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                stdin=subprocess.DEVNULL,
            )
            self.restarts += 1
            self.starts[unit.next_reason] += 1
            unit.next_reason = START_AFTER_EXIT

    def close(self) -> None:
        """Stop supervising, then stop every service (all signalled first, then each waited)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=STOP_DEADLINE_SECONDS)
        with self._lock:
            running = [p for u in self._units for p in (u.stopping, u.running) if p is not None]
            for process in running:
                if process.poll() is None:
                    process.terminate()
            for process in running:
                stop_process(process)
            for unit in self._units:
                unit.running = unit.stopping = None
