"""`nachtwacht agent status` names the reports the outbox set aside (refused for good, given up,
unreadable): they never reach the control plane, so an admin reading `status` must see them.
Real files in a temporary state directory, set aside by the real outbox; the real command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_daemon.connection.control_plane_client import Delivery
from agent_daemon.connection.outbox import KEEP_REJECTED, MAX_REASON_BYTES, Outbox, Report
from tests.agent_daemon.commands.test_run_start_errors import write_enrolled_config
from tests.worlds.daemons import run_agent
from tests.worlds.hosts import AgentHost

pytestmark = pytest.mark.slow


def outcome(run: str, slot: str | None) -> Report:
    return Report(
        method="PATCH",
        path=f"/v1/agent/runs/{run}",
        body={"status": "failed", "version": "1.5.0", "error": "disk full"},
        slot_key=slot,
        run_id=run,
    )


def unreachable(slot: str) -> Report:
    return Report(
        method="POST",
        path="/v1/agent/unreachable",
        body={"slot_key": slot},
        slot_key=slot,
    )


def set_aside(outbox: Outbox, report: Report, delivery: Delivery) -> None:
    """`report` queued and flushed once, to the answer `delivery`: as the daemon does it."""
    outbox.put(report)
    outbox.flush(lambda _: delivery)


def status(host: AgentHost) -> tuple[str, dict[str, object]]:
    text = run_agent("status", "--state-dir", str(host.state_dir))
    assert text.returncode == 0, text.stderr
    as_json = run_agent("status", "--json", "--state-dir", str(host.state_dir))
    assert as_json.returncode == 0, as_json.stderr
    return text.stdout, json.loads(as_json.stdout)


def attention(text: str) -> list[str]:
    """The problems `status` names, but for the daemon not running (none runs here)."""
    return [
        line.removeprefix("  ! ")
        for line in text.splitlines()
        if line.startswith("  ! ") and not line.startswith("  ! the daemon is not running")
    ]


def test_status_names_the_reports_set_aside_and_where_they_are(tmp_path: Path) -> None:
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    outbox = Outbox(host.state_dir / "outbox")
    rejected = outbox.rejected_directory
    # Each set aside on a night of its own: the outbox is empty again in between.
    set_aside(
        outbox,
        outcome("run-1", "2026-11-28T03:00"),
        Delivery(outcome="rejected", status=409, detail="the slot's window closed"),
    )
    set_aside(
        outbox,
        unreachable("2026-11-20T03:00"),
        Delivery(outcome="given_up", status=0, detail="slot 2026-11-20T03:00: older than 7 days"),
    )
    (outbox.directory / "000000000001.json").write_text('{"format_version": 1, "method": "PA')
    outbox.flush(lambda _: Delivery(outcome="delivered", status=200))
    set_aside(
        outbox,
        outcome("run-4", None),
        Delivery(outcome="rejected", status=404, detail="no such run"),
    )

    text, document = status(host)

    wrong = attention(text)
    assert wrong[0] == (
        "4 reports to the control plane were set aside and are never sent again (the newest 3 "
        f"are below; each file in {rejected} has its reason beside it in a .reason file): the "
        "control plane has no record of what they say — read the reasons, fix what they name, "
        f"then remove the files (rm {rejected}/*) to clear this"
    )
    newest = wrong[1:4]
    assert newest[0].endswith(
        ": the outcome (failed) of run run-4 (manual) — the control plane refused it for good "
        "(404: no such run) [000000000004.json]"
    )
    assert ": a report that cannot be read (" in newest[1]
    assert "is not valid JSON" in newest[1]
    assert "— it could not be read, so it was never sent: " in newest[1]
    assert newest[1].endswith("[000000000003.json]")
    assert newest[2].endswith(
        ": the report that this host could not reach the control plane in the window for "
        "2026-11-20 03:00 — the agent gave up on it: slot 2026-11-20T03:00: older than 7 days "
        "[000000000002.json]"
    )
    assert all(line.startswith("set aside ") for line in newest)
    assert not any("run-1" in line for line in wrong)  # counted, not among the newest three

    held = document["set_aside_reports"]
    assert isinstance(held, dict)
    assert held["count"] == 4
    assert held["directory"] == str(rejected)
    assert [item["file"] for item in held["newest"]] == [
        str(rejected / f"00000000000{n}.json") for n in (4, 3, 2)
    ]
    assert held["newest"][0]["run_id"] == "run-4"
    assert held["newest"][0]["why"] == {"status": 404, "detail": "no such run"}
    assert held["newest"][1]["unreadable"] is not None
    assert held["newest"][2]["slot_key"] == "2026-11-20T03:00"
    assert [item["words"] for item in held["newest"]] == newest
    assert wrong[0] in document["problems"]  # type: ignore[operator]

    # Removed once read, as the problem says: status is quiet about them again.
    for path in rejected.iterdir():
        path.unlink()
    text, document = status(host)
    assert "set aside" not in text
    assert document["set_aside_reports"] == {
        "count": 0,
        "directory": str(rejected),
        "newest": [],
    }


def test_one_report_set_aside_without_its_note_is_still_named(tmp_path: Path) -> None:
    """The power lost between the report's move and its note (an older agent wrote the note
    second), or a note that is not JSON: the report is named, its reason said to be missing."""
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    outbox = Outbox(host.state_dir / "outbox")
    set_aside(outbox, outcome("run-7", None), Delivery(outcome="rejected", status=409))
    (outbox.rejected_directory / "000000000001.reason").unlink()

    text, _ = status(host)
    wrong = attention(text)
    assert wrong[0].startswith(
        "1 report to the control plane was set aside and is never sent again"
    )
    assert "(it is below;" in wrong[0]
    assert wrong[1].endswith(
        "the outcome (failed) of run run-7 (manual) — no reason was recorded beside it "
        "[000000000001.json]"
    )

    (outbox.rejected_directory / "000000000001.reason").write_bytes(b"\x00\xff[")
    assert attention(status(host)[0])[1].endswith(
        "no reason was recorded beside it [000000000001.json]"
    )


def test_reports_set_aside_on_different_nights_do_not_overwrite_each_other(tmp_path: Path) -> None:
    """The outbox numbers its reports from 1 again once it is empty: each report set aside keeps
    a name of its own in `rejected/`, the newest `KEEP_REJECTED` of them."""
    outbox = Outbox(tmp_path)
    for night in range(KEEP_REJECTED + 2):
        set_aside(
            outbox,
            outcome(f"run-{night}", None),
            Delivery(outcome="rejected", status=409, detail=f"night {night}"),
        )
        assert outbox.pending() == []
    assert len(list(outbox.rejected_directory.glob("*.json"))) == KEEP_REJECTED
    held = outbox.set_aside(newest=KEEP_REJECTED + 5)
    assert held.count == KEEP_REJECTED
    assert [item.report.run_id for item in held.newest if item.report] == [
        f"run-{night}" for night in reversed(range(2, KEEP_REJECTED + 2))
    ]
    assert held.newest[0].why == {
        "status": 409,
        "detail": f"night {KEEP_REJECTED + 1}",
    }
    assert len(list(outbox.rejected_directory.glob("*.reason"))) == KEEP_REJECTED
    assert all(os.path.exists(item.path.with_suffix(".reason")) for item in held.newest)


@pytest.mark.parametrize("slot_key", ["42", '["2026-11-30T03:00"]', '{"a": 1}'])
def test_a_queued_report_whose_slot_is_not_text_is_unreadable_not_a_crash(
    tmp_path: Path, slot_key: str
) -> None:
    """A report file with a slot key that is no text (a file damaged on disk): `status` still
    answers, and the daemon's flush sets the file aside as unreadable instead of sending it."""
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    outbox = Outbox(host.state_dir / "outbox")
    outbox.directory.mkdir(parents=True)
    (outbox.directory / "000000000001.json").write_text(
        '{"format_version": 1, "method": "POST", "path": "/v1/agent/unreachable", '
        f'"body": {{}}, "slot_key": {slot_key}, "run_id": null}}'
    )
    text = run_agent("status", "--state-dir", str(host.state_dir))
    assert text.returncode == 0, text.stderr
    assert "Traceback" not in text.stderr

    sent: list[Report] = []
    result = outbox.flush(
        lambda report: sent.append(report) or Delivery(outcome="delivered", status=200)
    )
    assert sent == []
    assert [str(path.name) for path, _ in result.unreadable] == ["000000000001.json"]
    assert "slot_key" in result.unreadable[0][1]


@pytest.mark.parametrize("kind", ["named_pipe", "link_out", "too_large"])
def test_a_reason_planted_beside_a_report_set_aside_is_not_waited_on_followed_or_read_whole(
    tmp_path: Path, kind: str
) -> None:
    """The non-root daemon's user owns the outbox; root runs `status` (and `diagnose`, which
    keeps its output): a named pipe there held status for ever, a link led root's read to a file
    of root's (its words shown), a huge note was read whole. Each is named as no reason."""
    host = AgentHost(tmp_path / "host")
    write_enrolled_config(host)
    outbox = Outbox(host.state_dir / "outbox")
    set_aside(outbox, outcome("run-7", None), Delivery(outcome="rejected", status=409))
    note = outbox.rejected_directory / "000000000001.reason"
    note.unlink()
    secret = tmp_path / "roots-notes.json"
    secret.write_text(json.dumps({"reason": "the-hash-of-roots-password"}))
    if kind == "named_pipe":
        os.mkfifo(note, 0o644)
    elif kind == "link_out":
        note.symlink_to(secret)
    else:
        padding = " " * (MAX_REASON_BYTES + 1)
        note.write_text(json.dumps({"reason": "a reason past its bound"}) + padding)
    before = note.lstat()
    text = subprocess.run(
        [sys.executable, "-m", "nachtwacht", "agent", "status", "--state-dir",
         str(host.state_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr
    wrong = attention(text.stdout)
    assert wrong[1].endswith(
        "the outcome (failed) of run run-7 (manual) — no reason was recorded beside it "
        "[000000000001.json]"
    ), wrong
    assert "the-hash-of-roots-password" not in text.stdout
    assert "past its bound" not in text.stdout
    after = note.lstat()
    assert (after.st_mode, after.st_size, after.st_mtime_ns) == (
        before.st_mode, before.st_size, before.st_mtime_ns,
    )  # fmt: skip
