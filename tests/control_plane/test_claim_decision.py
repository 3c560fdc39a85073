"""The claim's decision from its facts: which refusal wins when several apply, and when the facts
refuse nothing (the claim goes on to the database). Pure: no database, no clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest

from control_plane.claims.caps import Caps, RoundCounts
from control_plane.claims.decision import ClaimFacts, ExistingRun, OfferedRelease, refusal_for
from control_plane.pins.holds import ActiveHold
from ground.contract import RefusalCode

SLOT = "2026-11-30T03:00"
SLOT_AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)  # 03:00 in Amsterdam (winter)
IN_THE_WINDOW = SLOT_AT + timedelta(minutes=4)
AFTER_THE_WINDOW = SLOT_AT + timedelta(minutes=15)
BEFORE_THE_SLOT = SLOT_AT - timedelta(seconds=1)
CLOSES = SLOT_AT + timedelta(minutes=15)
MARGIN_BEGINS = CLOSES - timedelta(seconds=60)
JUST_BEFORE_THE_MARGIN = MARGIN_BEGINS - timedelta(microseconds=1)

OPEN = ClaimFacts(
    agent_id=UUID(int=1),
    org_id=UUID(int=2),
    enabled=True,
    times=("03:00",),
    timezone="Europe/Amsterdam",
    catch_up=timedelta(minutes=15),
    grant_margin=timedelta(seconds=60),
    caps=Caps(org_cap=5, global_cap=25),
    brake_engaged=False,
    brake_reason=None,
    last_consumed_at=None,
    existing_run=None,
    hold=None,
    enrolled_at=SLOT_AT - timedelta(days=30),
    offered=OfferedRelease(
        release_id=UUID(int=4),
        agent_version="1.5.0",
        channel="stable",
        platform="linux-amd64",
        stopped=None,
        rolled_back_run=None,
    ),
)
ROOM = RoundCounts(org_granted=4, global_granted=24)
ORG_FULL = RoundCounts(org_granted=5, global_granted=5)
PLATFORM_FULL = RoundCounts(org_granted=0, global_granted=25)
BOTH_FULL = RoundCounts(org_granted=5, global_granted=25)

BRAKED = replace(OPEN, brake_engaged=True, brake_reason="incident 42")
NOTHING_TO_DO = replace(
    OPEN, existing_run=ExistingRun(run_id=UUID(int=3), status="nothing_to_do", token_usable=False)
)
CLAIMED = replace(
    OPEN, existing_run=ExistingRun(run_id=UUID(int=3), status="claimed", token_usable=True)
)
LEASE_ENDED = replace(
    OPEN, existing_run=ExistingRun(run_id=UUID(int=3), status="claimed", token_usable=False)
)
LATER_SLOT_CONSUMED = replace(OPEN, last_consumed_at=SLOT_AT + timedelta(hours=12))
EARLIER_SLOT_CONSUMED = replace(OPEN, last_consumed_at=SLOT_AT - timedelta(days=1))
SCHEDULE_OFF = replace(OPEN, enabled=False)
HELD = replace(
    OPEN, hold=ActiveHold(until=SLOT_AT + timedelta(days=3), reason="audit", set_by="customer")
)
HOLD_ENDED = replace(
    OPEN, hold=ActiveHold(until=SLOT_AT + timedelta(minutes=2), reason=None, set_by="agent")
)
assert OPEN.offered is not None
HALTED = replace(OPEN, offered=replace(OPEN.offered, stopped="halted: errors"))
ROLLED_BACK = replace(OPEN, offered=replace(OPEN.offered, rolled_back_run=UUID(int=5)))
HALTED_AND_ROLLED_BACK = replace(
    OPEN, offered=replace(OPEN.offered, stopped="halted: errors", rolled_back_run=UUID(int=5))
)
NOTHING_OFFERED = replace(OPEN, offered=None)
OTHER_TIMES = replace(OPEN, times=("04:00",))


@pytest.mark.parametrize(
    ("facts", "counts", "slot_key", "now", "expected"),
    [
        pytest.param(OPEN, ROOM, SLOT, IN_THE_WINDOW, None, id="room_left_goes_on"),
        pytest.param(OPEN, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.ORG_CAP, id="org_full"),
        pytest.param(
            OPEN, PLATFORM_FULL, SLOT, IN_THE_WINDOW, RefusalCode.GLOBAL_CAP, id="platform_full"
        ),
        pytest.param(
            OPEN, BOTH_FULL, SLOT, IN_THE_WINDOW, RefusalCode.ORG_CAP, id="org_cap_before_global"
        ),
        pytest.param(BRAKED, ROOM, SLOT, IN_THE_WINDOW, RefusalCode.BRAKE, id="brake"),
        pytest.param(
            BRAKED, BOTH_FULL, SLOT, IN_THE_WINDOW, RefusalCode.BRAKE, id="brake_before_caps"
        ),
        pytest.param(
            BRAKED,
            ROOM,
            SLOT,
            AFTER_THE_WINDOW,
            RefusalCode.BRAKE,
            id="brake_before_window_closed",
        ),
        pytest.param(
            replace(NOTHING_TO_DO, brake_engaged=True),
            ROOM,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.BRAKE,
            id="brake_before_slot_consumed",
        ),
        pytest.param(
            NOTHING_TO_DO,
            BOTH_FULL,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.SLOT_CONSUMED,
            id="up_to_date_report_before_caps",
        ),
        pytest.param(
            LATER_SLOT_CONSUMED,
            ORG_FULL,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.SLOT_CONSUMED,
            id="superseded_by_a_later_slot_before_caps",
        ),
        pytest.param(
            EARLIER_SLOT_CONSUMED, ROOM, SLOT, IN_THE_WINDOW, None, id="an_earlier_slot_is_no_bar"
        ),
        pytest.param(
            OPEN,
            ORG_FULL,
            SLOT,
            AFTER_THE_WINDOW,
            RefusalCode.WINDOW_CLOSED,
            id="window_closed_before_caps",
        ),
        pytest.param(
            NOTHING_TO_DO,
            ROOM,
            SLOT,
            AFTER_THE_WINDOW,
            RefusalCode.WINDOW_CLOSED,
            id="window_closed_before_slot_consumed",
        ),
        pytest.param(
            OPEN, ORG_FULL, SLOT, BEFORE_THE_SLOT, RefusalCode.NOT_A_SLOT, id="not_started_yet"
        ),
        pytest.param(
            SCHEDULE_OFF, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.NOT_A_SLOT, id="schedule_off"
        ),
        pytest.param(
            OTHER_TIMES, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.NOT_A_SLOT, id="not_its_time"
        ),
        pytest.param(
            OPEN, ROOM, "2026-11-30T03:07", IN_THE_WINDOW, RefusalCode.NOT_A_SLOT, id="off_grid"
        ),
        pytest.param(OPEN, ROOM, "tomorrow", IN_THE_WINDOW, RefusalCode.NOT_A_SLOT, id="no_key"),
        pytest.param(
            CLAIMED, BOTH_FULL, SLOT, IN_THE_WINDOW, None, id="same_claim_again_despite_caps"
        ),
        pytest.param(
            LEASE_ENDED, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.ORG_CAP, id="new_lease_capped"
        ),
        pytest.param(LEASE_ENDED, ROOM, SLOT, IN_THE_WINDOW, None, id="new_lease_with_room"),
        pytest.param(HELD, ROOM, SLOT, IN_THE_WINDOW, RefusalCode.HELD, id="held"),
        pytest.param(HELD, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.HELD, id="hold_before_caps"),
        pytest.param(
            replace(HELD, brake_engaged=True),
            ROOM,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.BRAKE,
            id="brake_before_hold",
        ),
        pytest.param(
            replace(HELD, existing_run=NOTHING_TO_DO.existing_run),
            ROOM,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.HELD,
            id="hold_before_slot_consumed",
        ),
        pytest.param(
            HELD, ROOM, SLOT, AFTER_THE_WINDOW, RefusalCode.HELD, id="hold_before_window_closed"
        ),
        pytest.param(HELD, ROOM, "tomorrow", IN_THE_WINDOW, RefusalCode.HELD, id="hold_no_key"),
        pytest.param(
            HOLD_ENDED, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.ORG_CAP, id="a_hold_ends"
        ),
        pytest.param(
            HALTED, BOTH_FULL, SLOT, IN_THE_WINDOW, RefusalCode.RELEASE_HALTED, id="halt_first"
        ),
        pytest.param(
            replace(HALTED, hold=HELD.hold),
            ROOM,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.HELD,
            id="hold_before_halt",
        ),
        pytest.param(
            replace(HALTED, existing_run=NOTHING_TO_DO.existing_run),
            ROOM,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.RELEASE_HALTED,
            id="halt_before_slot_consumed",
        ),
        pytest.param(
            ROLLED_BACK,
            ORG_FULL,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.RELEASE_ROLLED_BACK,
            id="rolled_back_before_caps",
        ),
        pytest.param(
            HALTED_AND_ROLLED_BACK,
            ROOM,
            SLOT,
            IN_THE_WINDOW,
            RefusalCode.RELEASE_HALTED,
            id="halt_before_rolled_back",
        ),
        pytest.param(
            NOTHING_OFFERED, ORG_FULL, SLOT, IN_THE_WINDOW, RefusalCode.ORG_CAP, id="no_offer"
        ),
    ],
)
def test_the_first_refusal_that_applies_wins(
    facts: ClaimFacts,
    counts: RoundCounts,
    slot_key: str,
    now: datetime,
    expected: RefusalCode | None,
) -> None:
    refusal = refusal_for(facts, counts, slot_key, now)
    assert (None if refusal is None else refusal.refusal) == expected


def test_a_cap_refusal_says_when_the_next_round_begins() -> None:
    refusal = refusal_for(OPEN, ORG_FULL, SLOT, IN_THE_WINDOW + timedelta(seconds=45))
    assert refusal is not None
    assert refusal.fields["retry_after_seconds"] == 15


def test_the_facts_of_a_hot_row_and_of_a_warmed_row_agree() -> None:
    row = {
        "agent_id": OPEN.agent_id,
        "org_id": OPEN.org_id,
        "enabled": True,
        "times": ["03:00"],
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": 15,
        "grant_margin_seconds": 60,
        "org_cap": 5,
        "global_cap": 25,
        "brake_engaged": False,
        "brake_reason": None,
        "last_consumed_at": None,
        "existing_run_id": None,
        "existing_status": None,
        "existing_token_usable": None,
        "hold_until": None,
        "hold_reason": None,
        "hold_set_by": None,
        "enrolled_at": OPEN.enrolled_at,
        "org_granted": 3,
    }
    assert ClaimFacts.of_row(row, offered=OPEN.offered) == OPEN


@pytest.mark.parametrize(
    ("facts", "counts", "now", "expected"),
    [
        pytest.param(OPEN, ROOM, JUST_BEFORE_THE_MARGIN, None, id="granted_a_microsecond_before"),
        pytest.param(
            OPEN, ROOM, MARGIN_BEGINS, RefusalCode.WINDOW_CLOSED, id="refused_at_its_start"
        ),
        pytest.param(
            OPEN,
            ROOM,
            CLOSES - timedelta(microseconds=1),
            RefusalCode.WINDOW_CLOSED,
            id="refused_at_the_last_instant",
        ),
        pytest.param(
            OPEN, BOTH_FULL, MARGIN_BEGINS, RefusalCode.WINDOW_CLOSED, id="margin_before_caps"
        ),
        pytest.param(
            OPEN, BOTH_FULL, JUST_BEFORE_THE_MARGIN, RefusalCode.ORG_CAP, id="caps_before_it"
        ),
        pytest.param(
            replace(OPEN, grant_margin=timedelta(0)),
            ROOM,
            CLOSES - timedelta(microseconds=1),
            None,
            id="no_margin_grants_until_the_close",
        ),
        pytest.param(
            replace(OPEN, grant_margin=timedelta(0)),
            ROOM,
            CLOSES,
            RefusalCode.WINDOW_CLOSED,
            id="no_margin_still_closes",
        ),
        pytest.param(
            CLAIMED, BOTH_FULL, MARGIN_BEGINS, None, id="a_grant_asked_again_is_given_back"
        ),
        pytest.param(
            LEASE_ENDED, ROOM, MARGIN_BEGINS, RefusalCode.WINDOW_CLOSED, id="no_new_lease_in_it"
        ),
        pytest.param(
            NOTHING_TO_DO, ROOM, MARGIN_BEGINS, RefusalCode.SLOT_CONSUMED, id="consumed_stays_so"
        ),
        pytest.param(BRAKED, ROOM, MARGIN_BEGINS, RefusalCode.BRAKE, id="brake_before_margin"),
        pytest.param(HELD, ROOM, MARGIN_BEGINS, RefusalCode.HELD, id="hold_before_margin"),
    ],
)
def test_no_new_token_in_the_window_s_last_margin(
    facts: ClaimFacts, counts: RoundCounts, now: datetime, expected: RefusalCode | None
) -> None:
    refusal = refusal_for(facts, counts, SLOT, now)
    assert (None if refusal is None else refusal.refusal) == expected


def test_the_margin_s_refusal_names_the_slot_its_close_and_the_margin() -> None:
    refusal = refusal_for(OPEN, ROOM, SLOT, MARGIN_BEGINS)
    assert refusal is not None
    assert refusal.status == 409
    assert refusal.fields["slot_key"] == SLOT
    assert str(refusal) == (
        "slot_key: the window of slot '2026-11-30T03:00' closes at 2026-11-30T02:15:00Z;"
        " no token is granted in its last 60 s"
    )
