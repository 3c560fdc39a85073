"""Undelivered reports wait on disk and go out in order; one refused for good blocks nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_daemon.connection.control_plane_client import Delivery
from agent_daemon.connection.outbox import Outbox, Report
from agent_daemon.errors import ControlPlaneUnreachable, DaemonStateError


def report(n: int) -> Report:
    return Report(
        method="PATCH",
        path=f"/v1/agent/runs/run-{n}",
        body={"status": "succeeded", "version": "1.5.0", "error": None},
        run_id=f"run-{n}",
    )


def test_reports_survive_a_restart_and_go_out_in_order(tmp_path: Path) -> None:
    Outbox(tmp_path).put(report(1))
    Outbox(tmp_path).put(report(2))
    Outbox(tmp_path).put(report(3))
    sent: list[str] = []

    def deliver(r: Report) -> Delivery:
        sent.append(r.path)
        return Delivery(outcome="delivered", status=200)

    result = Outbox(tmp_path).flush(deliver)
    assert sent == [f"/v1/agent/runs/run-{n}" for n in (1, 2, 3)]
    assert len(result.delivered) == 3
    assert Outbox(tmp_path).pending() == []


def test_offline_stops_the_flush_and_keeps_the_order(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    for n in (1, 2, 3):
        box.put(report(n))
    calls = 0

    def second_fails(r: Report) -> Delivery:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise ControlPlaneUnreachable("down")
        return Delivery(outcome="delivered", status=200)

    result = box.flush(second_fails)
    assert result.offline is not None
    assert [r.run_id for r in box.pending()] == ["run-2", "run-3"]
    box.put(report(4))
    assert [r.run_id for r in box.pending()] == ["run-2", "run-3", "run-4"]


def test_the_same_report_queued_twice_is_kept_once(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    box.put(report(1))
    box.put(report(1))
    assert len(box.pending()) == 1


def test_a_report_refused_for_good_is_set_aside_and_the_rest_go_out(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    box.put(report(1))
    box.put(report(2))

    def refuse_first(r: Report) -> Delivery:
        if r.run_id == "run-1":
            return Delivery(outcome="rejected", status=409, detail="window_closed")
        return Delivery(outcome="delivered", status=200)

    result = box.flush(refuse_first)
    assert [r.run_id for r, _ in result.rejected] == ["run-1"]
    assert [r.run_id for r in result.delivered] == ["run-2"]
    assert box.pending() == []
    assert len(list((tmp_path / "rejected").glob("*.json"))) == 1
    assert "window_closed" in next((tmp_path / "rejected").glob("*.reason")).read_text()


def test_an_unreadable_report_is_set_aside_not_fatal(tmp_path: Path) -> None:
    box = Outbox(tmp_path)
    box.put(report(1))
    (tmp_path / "000000000002.json").write_text("{not json")
    box.put(report(3))
    result = box.flush(lambda r: Delivery(outcome="delivered", status=200))
    assert [r.run_id for r in result.delivered] == ["run-1", "run-3"]
    assert len(result.unreadable) == 1
    assert box.pending() == []


def test_a_report_from_a_newer_agent_is_refused_when_listed(tmp_path: Path) -> None:
    (tmp_path / "000000000001.json").write_text('{"format_version": 9}')
    with pytest.raises(DaemonStateError, match="newer"):
        Outbox(tmp_path).pending()


@pytest.mark.parametrize(
    "path",
    [
        "https://elsewhere.example/v1/agent/runs/run-2",
        "//elsewhere.example/v1/agent/runs/run-2",
        "/v1/admin/brake",
        "/v1/agent/runs/../../admin/brake",
        "/v1/agent/",
        "/v1/agent/runs/run-2?next=https://elsewhere.example",
        "",
    ],
)
def test_a_queued_report_to_anywhere_but_the_agents_api_is_set_aside_never_sent(
    tmp_path: Path, path: str
) -> None:
    """A report goes out with the agent's credential: a path on disk that names another host or
    another API is never followed."""
    box = Outbox(tmp_path)
    box.put(report(1))
    box.put(report(2))
    queued = tmp_path / "000000000002.json"
    queued.write_text(queued.read_text().replace("/v1/agent/runs/run-2", path))
    box.put(report(3))
    sent: list[str] = []

    def deliver(r: Report) -> Delivery:
        sent.append(r.path)
        return Delivery(outcome="delivered", status=200)

    result = box.flush(deliver)
    assert sent == ["/v1/agent/runs/run-1", "/v1/agent/runs/run-3"]
    assert [why for _, why in result.unreadable] == [
        f"{queued}: not a usable outbox report (path {path!r} is not one of the agent's API"
        " (/v1/agent/…))"
    ]
    assert box.pending() == []


@pytest.mark.parametrize("stray", ["²³.json", "٣.json", "99.json", "1_0.json", "+5.json"])
def test_a_stray_file_named_like_a_number_is_passed_over_and_loses_no_report(
    tmp_path: Path, stray: str
) -> None:
    # Only the outbox names its files (twelve ASCII digits); anything else in the folder, even a
    # name `int` reads or one that sorts after them, is not a queued report.
    box = Outbox(tmp_path)
    box.put(report(1))
    (tmp_path / stray).write_text('{"not": "a report"}')
    box.put(report(2))
    box.put(report(3))
    assert [r.run_id for r in box.pending()] == ["run-1", "run-2", "run-3"]
    assert box.count() == 3
    assert (tmp_path / stray).read_text() == '{"not": "a report"}'
