"""A customer host in a temporary directory: release keys, an enrolled agent config, and
`nachtwacht agent …` run as real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from signed_release import generate_key_files

REPO_ROOT = Path(__file__).resolve().parents[3]
# A deadline for a failure, never a speed assertion.
EVENT_DEADLINE_SECONDS = 120.0


def agent_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nachtwacht.cli", "agent", *args]


def agent_environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NACHTWACHT_")}
    env.pop("STATE_DIRECTORY", None)
    env.pop("NOTIFY_SOCKET", None)
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")] if part
    )
    env.update(extra)
    return env


def run_agent(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        agent_command(*args),
        env=env or agent_environment(),
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=EVENT_DEADLINE_SECONDS,
    )


@dataclass
class AgentHost:
    root: Path
    keys_dir: Path | None = None  # shared release keys; default: a new pair under root/keys

    def __post_init__(self) -> None:
        self.state_dir = self.root / "state"
        self.install_root = self.root / "install"
        if self.keys_dir is None:
            self.keys_dir = self.root / "keys"
        if not (self.keys_dir / "release.pub").exists():
            generate_key_files(self.keys_dir)

    @property
    def public_key(self) -> Path:
        assert self.keys_dir is not None
        return self.keys_dir / "release.pub"

    def enroll(
        self, url: str, credential: str, *extra: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_agent(
            "enroll",
            "--state-dir",
            str(self.state_dir),
            "--url",
            url,
            "--credential",
            credential,
            "--trusted-key",
            str(self.public_key),
            "--install-root",
            str(self.install_root),
            "--restart-command",
            "true",
            *extra,
            env=env,
        )

    def status(
        self, *extra: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return run_agent("status", "--state-dir", str(self.state_dir), *extra, env=env)

    def start(
        self, *, fake_clock: str | None = None, extra_env: dict[str, str] | None = None
    ) -> DaemonProcess:
        env = agent_environment(**(extra_env or {}))
        if fake_clock is not None:
            env["NACHTWACHT_FAKE_CLOCK"] = fake_clock
        log_path = self.root / f"daemon-{time.monotonic_ns()}.log"
        stderr_path = log_path.with_suffix(".stderr")
        with stderr_path.open("w") as stderr:
            process = subprocess.Popen(
                agent_command("run", "--state-dir", str(self.state_dir)),
                env=env,
                cwd=REPO_ROOT,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
            )
        return DaemonProcess(process=process, stderr_path=stderr_path)


@dataclass
class DaemonProcess:
    """A running `nachtwacht agent run`; its stdout is read line by line as JSON events."""

    process: subprocess.Popen[str]
    stderr_path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    other_lines: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._changed:
                try:
                    self.events.append(json.loads(line))
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
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=EVENT_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
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
