"""One daemon's slot against an in-memory control plane (httpx.MockTransport) and a stub updater,
on a manual clock at 03:00 in Amsterdam; state and outbox are real files."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock

__all__ = ["MANUAL_RUN_ID", "SLOT_AT", "SLOT_KEY", "make"]

# 03:00 in Amsterdam on 2026-11-30 (CET, UTC+1) is 02:00Z.
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
SLOT_KEY = "2026-11-30T03:00"
# The contract names runs by UUID.
MANUAL_RUN_ID = "0d7a0000-0000-4000-8000-00000000000a"


def make(tmp_path: Path, *, at: datetime = SLOT_AT, **plane: object) -> tuple[Harness, ManualClock]:
    clock = ManualClock(at)
    control_plane = FakeControlPlane(now=clock.now, **plane)  # type: ignore[arg-type]
    return Harness(tmp_path, control_plane, StubUpdater(), clock), clock
