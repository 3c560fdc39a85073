"""`unreachable-slots.json` damaged on disk (the power lost mid-write on a disk that lies, a hand
edit, a newer agent's file): the minute goes on — it polls, claims and updates as it would — and
the damage costs one warning, never a crash every minute. Real files, the daemon's real minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_daemon.disk.atomic_file import read_versioned_json
from agent_daemon.disk.unreachable_file import UNREACHABLE_FILE_NAME
from tests.agent_daemon.minute.test_daemon_attacks import make

NOTED = {
    "slot_key": "2026-11-30T03:00",
    "slot_at": "2026-11-30T02:00:00Z",
    "error": "GET /v1/agent/config: cannot connect",
    "first_tried_at": "2026-11-30T02:00:00Z",
    "last_tried_at": "2026-11-30T02:01:00Z",
    "attempts": 2,
}


def _file(*slots: dict[str, object], version: int = 1) -> bytes:
    return json.dumps({"format_version": version, "slots": list(slots)}).encode()


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        pytest.param(b"", "unreachable_slots.unreadable", id="empty"),
        pytest.param(_file(NOTED)[:40], "unreachable_slots.unreadable", id="truncated"),
        pytest.param(b"\x00" * 64, "unreachable_slots.unreadable", id="zeros"),
        pytest.param(_file(NOTED, version=9), "unreachable_slots.unreadable", id="newer_format"),
        pytest.param(
            _file({**NOTED, "attempts": 0}), "unreachable_slots.unreadable", id="no_attempts"
        ),
        pytest.param(
            _file({**NOTED, "slot_at": "yesterday"}), "unreachable_slots.unreadable", id="no_time"
        ),
        pytest.param(
            _file({**NOTED, "slot_key": "2026-11-30T03:00" + "x" * 40}),
            "unreachable_slots.unreportable",
            id="slot_key_too_long",
        ),
    ],
)
def test_a_damaged_file_costs_a_warning_and_the_minute_goes_on(
    tmp_path: Path, content: bytes, warning: str
) -> None:
    path = tmp_path / UNREACHABLE_FILE_NAME
    tmp_path.mkdir(exist_ok=True)
    path.write_bytes(content)
    h, _ = make(tmp_path, contract_version=7)

    assert h.daemon.tick() == "dispatched"
    assert h.daemon.tick() == "no_slot"

    names = h.event_names()
    assert "tick.crashed" not in names and "tick.failed" not in names
    assert names.count(warning) == 1
    assert h.state().last_consumed is not None
    assert h.control_plane.unreachable_bodies == []
    assert h.outbox.pending() == []
    assert h.outbox.set_aside(newest=1).count == 0
    if warning == "unreachable_slots.unreportable":
        assert read_versioned_json(path, format_version=1) == {"slots": []}
