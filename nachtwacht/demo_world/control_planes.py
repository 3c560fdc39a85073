"""`nachtwacht control serve` as a real process on loopback, and its admin commands.

    plane = start_control_plane(data_dir=…, stderr_path=…, fake_clock=…)   # or database_url=…
    org = plane.create_org("Acme")          # `nachtwacht control create-org Acme --json …`
    plane.publish_release(build)            # a SignedBuild (release_tooling)
    plane.stop()                            # SIGTERM, the exit code

The server listens on an ephemeral port; its URL comes from the ready line it prints
(`control_plane.ready_line`). Several starts over one database are several replicas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from control_plane.ready_line import wait_for_ready_url
from ground.clock import FAKE_CLOCK_ENV
from nachtwacht.demo_world.children import (
    SUBPROCESSES,
    Child,
    Launcher,
    run_nachtwacht,
    stop_process,
)
from nachtwacht.demo_world.errors import WorldError
from nachtwacht.demo_world.release_tooling import SignedBuild, publish

__all__ = ["START_DEADLINE_SECONDS", "RunningControlPlane", "start_control_plane"]

# A deadline for a failure to start, not a speed expectation: a healthy start takes seconds.
START_DEADLINE_SECONDS = 120.0


@dataclass
class RunningControlPlane:
    """One `control serve` process; `database_url` is "" when it runs on `data_dir`'s server."""

    base_url: str
    database_url: str
    process: Child
    stderr_path: Path
    env: dict[str, str] = field(default_factory=dict)
    data_dir: Path | None = None
    launcher: Launcher = SUBPROCESSES

    @property
    def pid(self) -> int:
        return self.process.pid

    def location(self) -> list[str]:
        """The flags that point an admin command at this server's database."""
        if self.data_dir is not None:
            return ["--data-dir", str(self.data_dir)]
        return ["--database-url", self.database_url]

    def admin(self, *args: str) -> Any:
        """Run `nachtwacht control ARGS --json <location>` and return its parsed output."""
        output = run_nachtwacht(
            "control", *args, "--json", *self.location(), env=self.env, launcher=self.launcher
        )
        return json.loads(output)

    def create_org(self, name: str) -> dict[str, str]:
        created: dict[str, str] = self.admin("create-org", name)
        return created

    def enroll_agent(self, org_id: str, name: str) -> dict[str, str]:
        enrolled: dict[str, str] = self.admin("enroll-agent", "--org", org_id, "--name", name)
        return enrolled

    def create_operator_key(self) -> str:
        key: str = self.admin("create-operator-key")["operator_key"]
        return key

    def publish_release(
        self, build: SignedBuild, *, stage: str | None = None, allow_downgrade: bool = False
    ) -> None:
        """`publish-release`: the control plane checks the signature before it stores anything;
        `stage` is its `--stage` (default: canary after a pair's first release),
        `allow_downgrade` its `--allow-downgrade`."""
        publish(
            build,
            location=self.location(),
            env=self.env,
            stage=stage,
            launcher=self.launcher,
            allow_downgrade=allow_downgrade,
        )

    def stop(self) -> int:
        """SIGTERM, then wait; returns the exit code."""
        code = stop_process(self.process, deadline_seconds=START_DEADLINE_SECONDS)
        assert code is not None
        self.detach()
        return code

    def detach(self) -> None:
        """Stop reading from it; the server keeps running (the demo's `--keep`)."""
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


def start_control_plane(
    *,
    stderr_path: Path,
    database_url: str | None = None,
    data_dir: Path | None = None,
    fake_clock: str | None = None,
    env: Mapping[str, str] | None = None,
    args: Sequence[str] = (),
    workers: int = 1,
    launcher: Launcher = SUBPROCESSES,
) -> RunningControlPlane:
    """Start `serve` on 127.0.0.1 and an ephemeral port; returns once its ready line came.

    `launcher` starts it (`children.Launcher`) and, later, its admin commands. A server that is to
    outlive its caller (the demo's `--keep`) needs an interpreter of its own, the default.

    One worker unless asked: the tests and the demo start many servers at once, and each worker
    is a process with its own pool and reconcile loop (`serve`'s own default is the cores)."""
    if (database_url is None) == (data_dir is None):
        raise ValueError("give exactly one of database_url and data_dir")
    location = ["--data-dir", str(data_dir)] if data_dir else ["--database-url", str(database_url)]
    extra = dict(env or {})
    if fake_clock is not None:
        extra[FAKE_CLOCK_ENV] = fake_clock
    command = (
        "control",
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--workers",
        str(workers),
        *location,
        *args,
    )
    child_env = launcher.environment(extra)
    process = launcher.start(*command, env=child_env, stderr_path=stderr_path)
    assert process.stdout is not None
    url = wait_for_ready_url(process.stdout, timeout_seconds=START_DEADLINE_SECONDS)
    if url is None:
        process.kill()
        process.wait()
        process.stdout.close()
        tail = stderr_path.read_text(errors="replace").strip().splitlines()[-1:]
        raise WorldError(
            "the control plane did not start"
            + (f": {tail[0]}" if tail else "")
            + f" (log: {stderr_path})"
        )
    return RunningControlPlane(
        base_url=url,
        database_url=database_url or "",
        process=process,
        stderr_path=stderr_path,
        env=child_env,
        data_dir=data_dir,
        launcher=launcher,
    )
