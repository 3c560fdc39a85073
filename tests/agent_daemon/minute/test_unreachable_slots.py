"""The agent remembers each slot whose window it was inside while it could not reach the control
plane, and says so once it can (contract 7): against the in-memory control plane."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_daemon.disk.unreachable_file import (
    UNREACHABLE_FILE_NAME,
    UnreachableSlot,
    UnreachableSlotsFile,
)
from agent_daemon.minute.unreachable_slots import plain_error
from ground.contract import UnreachableReport, format_instant
from ground.limits import MAX_UNREACHABLE_ERROR_LENGTH
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock

# 03:00 in Amsterdam on 2026-11-30 (CET, UTC+1) is 02:00Z; the window closes at 02:15Z.
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
SLOT_KEY = "2026-11-30T03:00"


def make(tmp_path: Path) -> tuple[Harness, ManualClock]:
    clock = ManualClock(SLOT_AT - timedelta(minutes=10))
    plane = FakeControlPlane(now=clock.now)
    h = Harness(tmp_path, plane, StubUpdater(), clock)
    # One minute before the slot reaches the control plane: the schedule is cached.
    assert h.daemon.tick() == "no_slot"
    return h, clock


def noted_slots(h: Harness) -> tuple[UnreachableSlot, ...]:
    return UnreachableSlotsFile(h.state_dir / UNREACHABLE_FILE_NAME).load().slots


def through_the_window(h: Harness, clock: ManualClock, *minutes: int) -> list[str]:
    results = []
    for minute in minutes:
        clock.set(SLOT_AT + timedelta(minutes=minute))
        results.append(h.daemon.tick())
    return results


def test_a_window_without_the_control_plane_is_remembered_and_reported_once_it_answers(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)
    h.control_plane.online = False
    assert through_the_window(h, clock, 1, 5, 20) == ["offline"] * 3
    [noted] = noted_slots(h)
    assert noted.slot_key == SLOT_KEY
    assert "connection refused" in noted.error
    # The tries inside the window; the minute after it closed (03:20) plans no slot.
    assert (noted.first_tried_at, noted.last_tried_at, noted.attempts) == (
        SLOT_AT + timedelta(minutes=1),
        SLOT_AT + timedelta(minutes=5),
        2,
    )
    assert h.event_names().count("slot.unreachable") == 1
    assert h.control_plane.unreachable_bodies == []

    h.control_plane.online = True
    h.control_plane.contract_version = 7
    assert through_the_window(h, clock, 40) == ["no_slot"]
    [body] = h.control_plane.unreachable_bodies
    assert body == {
        "slot_key": SLOT_KEY,
        "error": noted.error,
        "first_tried_at": format_instant(SLOT_AT + timedelta(minutes=1)),
        "last_tried_at": format_instant(SLOT_AT + timedelta(minutes=5)),
        "attempts": 2,
    }
    UnreachableReport.model_validate(body)
    assert noted_slots(h) == ()
    assert h.outbox.pending() == []
    # Said once: a later minute sends nothing more.
    through_the_window(h, clock, 41)
    assert len(h.control_plane.unreachable_bodies) == 1


def test_a_control_plane_of_an_older_contract_is_told_nothing_until_it_speaks_7(
    tmp_path: Path,
) -> None:
    h, clock = make(tmp_path)
    h.control_plane.online = False
    through_the_window(h, clock, 2)
    h.control_plane.online = True  # contract_version None: a release before the field
    through_the_window(h, clock, 30)
    assert h.control_plane.unreachable_bodies == []
    assert not any(r.endswith("/agent/unreachable") for r in h.control_plane.requests)
    assert len(noted_slots(h)) == 1
    h.control_plane.contract_version = 7  # upgraded
    through_the_window(h, clock, 31)
    assert [b["slot_key"] for b in h.control_plane.unreachable_bodies] == [SLOT_KEY]


def test_a_claim_that_finds_nothing_answering_notes_its_slot(tmp_path: Path) -> None:
    # The poll went through, the claim did not: the slot the claim was for is noted.
    h, clock = make(tmp_path)
    h.control_plane.claims_unreachable = True
    assert through_the_window(h, clock, 1) == ["offline"]
    [noted] = noted_slots(h)
    assert (noted.slot_key, noted.attempts) == (SLOT_KEY, 1)
    assert "connection reset" in noted.error


def test_a_load_balancers_error_page_is_unreachable(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    h.control_plane.gateway_status = 502
    assert through_the_window(h, clock, 1) == ["offline"]
    [noted] = noted_slots(h)
    assert "502" in noted.error


def test_our_database_down_is_not_unreachable(tmp_path: Path) -> None:
    # The control plane answered in the contract's words: its miss is platform_unavailable.
    h, clock = make(tmp_path)
    h.control_plane.gateway_status = 503
    h.control_plane.answered_by_us = True
    assert through_the_window(h, clock, 1, 2) == ["platform_unavailable"] * 2
    assert noted_slots(h) == ()


def test_an_agent_down_through_the_window_remembers_nothing(tmp_path: Path) -> None:
    h, clock = make(tmp_path)
    clock.set(SLOT_AT + timedelta(minutes=30))  # the daemon did not run in the window
    h.control_plane.contract_version = 7
    assert h.daemon.tick() == "no_slot"
    assert noted_slots(h) == ()
    assert h.control_plane.unreachable_bodies == []


@pytest.mark.parametrize(
    "error",
    [
        pytest.param("refused\x1b[2J\x1b[H\x00 all is well", id="control_characters"),
        pytest.param("x" * 100_000, id="huge"),
        pytest.param("   ", id="blank"),
    ],
)
def test_the_error_is_sent_plain_and_bounded(error: str) -> None:
    text = plain_error(error)
    assert len(text) <= MAX_UNREACHABLE_ERROR_LENGTH
    assert not any(ord(c) < 0x20 for c in text)
    at = SLOT_AT
    UnreachableReport(
        slot_key=SLOT_KEY, error=text, first_tried_at=at, last_tried_at=at, attempts=1
    )
