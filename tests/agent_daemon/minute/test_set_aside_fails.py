"""A report the control plane refuses for good cannot be set aside (`outbox/rejected` cannot be
written: a full disk, a folder left owned by root beside a daemon of its own user): the minute
goes on — the slot is claimed and updated, the reports behind it go out — and the refused report
stays queued, said once as an error. Real files, the daemon's real minute."""

from __future__ import annotations

from pathlib import Path

from agent_daemon.connection.outbox import Report
from tests.agent_daemon.minute.test_daemon_attacks import make

UNKNOWN_RUN = "0d7a0000-0000-4000-8000-0000000000aa"


def test_a_report_that_cannot_be_set_aside_holds_up_neither_the_minute_nor_the_others(
    tmp_path: Path,
) -> None:
    h, _ = make(tmp_path)
    outbox = h.outbox
    outbox.put(
        Report(
            method="PATCH",
            path=f"/v1/agent/runs/{UNKNOWN_RUN}",
            body={"status": "failed", "version": "1.4.1", "error": "disk full"},
            run_id=UNKNOWN_RUN,
        )
    )
    outbox.put(
        Report(
            method="POST",
            path="/v1/agent/runs",
            body={"slot_key": "2026-11-29T03:00", "status": "up_to_date", "version": "1.4.1"},
            slot_key="2026-11-29T03:00",
        )
    )
    outbox.rejected_directory.write_text("not a folder\n")  # mkdir there fails

    assert h.daemon.tick() == "dispatched"

    names = h.event_names()
    assert "tick.failed" not in names and "tick.crashed" not in names
    # Each refused report was sent, and neither could be set aside: both stay queued, tried
    # again next minute, each said as an error.
    asked = h.control_plane.requests
    assert f"PATCH /v1/agent/runs/{UNKNOWN_RUN}" in asked
    assert "POST /v1/agent/runs" in asked
    failed = [e for e in h.events() if e["event"] == "report.set_aside_failed"]
    assert [(e.get("run_id"), e.get("slot_key"), e["level"]) for e in failed] == [
        (UNKNOWN_RUN, None, "error"),
        (None, "2026-11-29T03:00", "error"),
    ]
    assert all("rejected" in str(e["error"]) for e in failed)
    assert [(r.run_id, r.slot_key) for r in outbox.pending()] == [
        (UNKNOWN_RUN, None),
        (None, "2026-11-29T03:00"),
    ]
    assert outbox.rejected_directory.read_text() == "not a folder\n"

    # The next minute sends them again, and says nothing more about them.
    h.daemon.tick()
    assert h.event_names().count("report.set_aside_failed") == 2
    assert len(outbox.pending()) == 2
