"""The five steps of a slot as `decide` holds them, and proof that the daemon and the simulated
fleet take the same step for every answer the control plane can give.

The pure table first (no I/O, no clock); then every `RefusalCode`, an unknown code and a 503
`database_unavailable` fed through the real `Daemon` and through a `SimulatedAgent`, both against
the same in-memory control plane, compared step by step.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from pathlib import Path

import pytest

from agent_daemon.minute.decision import (
    AgentFacts,
    ClaimManual,
    ClaimSlot,
    EndManual,
    GiveUpSlot,
    Granted,
    NothingToDo,
    Refused,
    ResumeClaim,
    StartUpdate,
    Unreachable,
    Wait,
    decide,
)
from ground.contract import (
    AgentConfig,
    AnswerCode,
    BrakeView,
    ClaimedRelease,
    ClaimGrant,
    ErrorDetail,
    ManualUpdateView,
    RefusalCode,
    ReleaseView,
    ScheduleView,
    TokenView,
)
from nachtwacht.demo_night.simulated import SimulatedAgent, SimulatedFleet
from shared_planner import Slot, due_slot
from tests.agent_daemon.daemon_support.fake_control_plane import (
    CREDENTIAL,
    ClaimRefusal,
    FakeControlPlane,
)
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.worlds.clocks import ManualClock

# 03:00 in Amsterdam on 2026-11-30 (CET) is 02:00Z; the tick comes a minute into the window.
NOW = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)
AGENT_ID = uuid.UUID("4b1c9a6e-0000-4000-8000-000000000001")
RUN_ID = uuid.UUID("5f0e0000-0000-4000-8000-000000000001")


def the_due_slot() -> Slot:
    slot = due_slot(["03:00"], now=NOW, tz="Europe/Amsterdam")
    assert slot is not None
    return slot


SLOT = the_due_slot()


def config(
    *, release: str | None = "1.5.0", brake: bool = False, manual: uuid.UUID | None = None
) -> AgentConfig:
    return AgentConfig(
        agent_id=AGENT_ID,
        schedule=ScheduleView(enabled=True, times=("03:00",)),
        timezone="Europe/Amsterdam",
        catch_up_minutes=15,
        brake=BrakeView(engaged=brake),
        release=None if release is None else ReleaseView(version=release, manifest_version=42),
        manual_update=None if manual is None else ManualUpdateView(run_id=manual),
    )


def facts(**overrides: object) -> AgentFacts:
    fields: dict[str, object] = {"last_consumed_at": None, "installed_version": "1.4.1"}
    fields.update(overrides)
    return AgentFacts(**fields)  # type: ignore[arg-type]


def refusal(code: str) -> ErrorDetail:
    return ErrorDetail(code=code, message=f"refused: {code}")


def grant() -> ClaimGrant:
    return ClaimGrant(
        run_id=RUN_ID,
        token=TokenView(id=RUN_ID, expires_at=NOW + timedelta(hours=1)),
        release=ClaimedRelease(
            version="1.5.0",
            manifest_version=42,
            manifest_b64="",
            signature_b64="",
            artifact_url="/v1/agent/runs/x/artifact",
        ),
    )


CLAIM = ClaimSlot(slot=SLOT, from_version="1.4.1")


# -- the pure table ---------------------------------------------------------------------------


def test_offline_consumes_nothing() -> None:
    action = decide(facts(), None, Unreachable(error="connection refused"), NOW)
    assert isinstance(action, Wait)
    assert (action.reason, action.consumes_slot) == ("offline", False)


def test_offline_at_the_claim_consumes_nothing() -> None:
    action = decide(facts(), config(), Unreachable(error="timeout", request=CLAIM), NOW)
    assert isinstance(action, Wait)
    assert (action.reason, action.consumes_slot, action.request) == ("offline", False, CLAIM)


def test_nothing_to_do_consumes_the_slot() -> None:
    action = decide(facts(installed_version="1.5.0"), config(), None, NOW)
    assert isinstance(action, NothingToDo)
    assert (action.slot, action.consumes_slot) == (SLOT, True)


def test_no_release_published_is_nothing_to_do() -> None:
    assert isinstance(decide(facts(), config(release=None), None, NOW), NothingToDo)


def test_a_due_slot_with_a_newer_release_asks_for_the_token() -> None:
    assert decide(facts(), config(), None, NOW) == CLAIM


# The config offers 1.5.0 with manifest 42; the host runs 1.6.0.
@pytest.mark.parametrize(
    ("floor", "claims"),
    [
        pytest.param(41, True, id="signed_after_every_accepted_manifest"),
        pytest.param(42, False, id="manifest_at_the_floor"),
        pytest.param(43, False, id="an_old_release_below_the_floor"),
        pytest.param(None, False, id="no_floor_known"),
    ],
)
def test_an_older_release_is_claimed_only_when_signed_after_every_accepted_manifest(
    floor: int | None, claims: bool
) -> None:
    """Only a freshly signed manifest can be a deliberate downgrade; whether it may be installed
    is the signature's to say (the updater refuses one that does not allow a downgrade)."""
    action = decide(facts(installed_version="1.6.0", floor=floor), config(), None, NOW)
    if claims:
        assert action == ClaimSlot(slot=SLOT, from_version="1.6.0")
    else:
        assert isinstance(action, NothingToDo)


def test_the_same_version_signed_again_is_nothing_to_do() -> None:
    action = decide(facts(installed_version="1.5.0", floor=41), config(), None, NOW)
    assert isinstance(action, NothingToDo)


def test_the_brake_named_in_the_config_consumes_nothing_and_asks_nobody() -> None:
    action = decide(facts(), config(brake=True), None, NOW)
    assert isinstance(action, Wait)
    assert (action.reason, action.consumes_slot) == ("braked", False)


def test_a_consumed_slot_is_not_due_again() -> None:
    action = decide(facts(last_consumed_at=SLOT.at), config(), None, NOW)
    assert isinstance(action, Wait)
    assert action.reason == "no_slot"


def test_after_the_window_nothing_is_due() -> None:
    action = decide(facts(), config(), None, SLOT.at + timedelta(minutes=15))
    assert isinstance(action, Wait)
    assert action.reason == "no_slot"


def test_a_grant_is_the_claim_and_consumes_the_slot() -> None:
    action = decide(facts(), config(), Granted(request=CLAIM, grant=grant()), NOW)
    assert isinstance(action, StartUpdate)
    assert action.consumes_slot


def test_a_claim_in_progress_is_finished_before_anything_is_planned() -> None:
    action = decide(facts(claim_in_progress=True), config(manual=RUN_ID), None, NOW)
    assert isinstance(action, ResumeClaim)


def test_a_manual_update_skips_the_planner_and_is_handled_once() -> None:
    assert decide(facts(), config(manual=RUN_ID), None, NOW + timedelta(hours=8)) == ClaimManual(
        run_id=str(RUN_ID), from_version="1.4.1"
    )
    handled = facts(handled_manual_runs=frozenset({str(RUN_ID)}))
    assert decide(handled, config(manual=RUN_ID), None, NOW) == CLAIM


def test_a_manual_grant_consumes_no_scheduled_slot() -> None:
    manual = ClaimManual(run_id=str(RUN_ID), from_version="1.4.1")
    action = decide(facts(), config(manual=RUN_ID), Granted(request=manual, grant=grant()), NOW)
    assert isinstance(action, StartUpdate)
    assert not action.consumes_slot


@pytest.mark.parametrize("code", list(RefusalCode), ids=[code.value for code in RefusalCode])
def test_a_refusal_consumes_the_slot_exactly_when_its_code_says_so(code: RefusalCode) -> None:
    action = decide(facts(), config(), Refused(request=CLAIM, detail=refusal(code.value)), NOW)
    assert action.consumes_slot is code.consumes_slot
    assert isinstance(action, GiveUpSlot) is code.consumes_slot


ENDING_CODES = [code for code in RefusalCode if not code.is_cap]


@pytest.mark.parametrize("code", ENDING_CODES, ids=[code.value for code in ENDING_CODES])
def test_a_refused_manual_update_ends_that_request_and_consumes_no_slot(code: RefusalCode) -> None:
    manual = ClaimManual(run_id=str(RUN_ID), from_version="1.4.1")
    action = decide(facts(), config(), Refused(request=manual, detail=refusal(code.value)), NOW)
    assert isinstance(action, EndManual)
    assert not action.consumes_slot


@pytest.mark.parametrize("code", [RefusalCode.ORG_CAP, RefusalCode.GLOBAL_CAP])
def test_a_manual_update_refused_by_a_cap_waits_and_is_claimed_again(code: RefusalCode) -> None:
    manual = ClaimManual(run_id=str(RUN_ID), from_version="1.4.1")
    answer = Refused(request=manual, detail=refusal(code.value))
    action = decide(facts(), config(manual=RUN_ID), answer, NOW)
    assert action == Wait(reason="throttled", request=manual, detail=answer.detail)
    assert not action.consumes_slot
    # Not handled: the next minute, while the config still offers it, claims it again.
    assert decide(facts(), config(manual=RUN_ID), None, NOW + timedelta(minutes=1)) == manual


def test_an_unknown_code_consumes_nothing() -> None:
    answer = Refused(request=CLAIM, detail=refusal("a_code_from_a_newer_control_plane"))
    action = decide(facts(), config(), answer, NOW)
    assert isinstance(action, Wait)
    assert (action.reason, action.consumes_slot) == ("refused", False)


# -- the daemon and the simulated fleet take the same step ---------------------------------------

ANSWERS = [
    *(pytest.param(ClaimRefusal.of(code), id=code.value) for code in RefusalCode),
    pytest.param(
        ClaimRefusal(code="a_code_from_a_newer_control_plane", status=HTTPStatus.CONFLICT),
        id="unknown_code",
    ),
    pytest.param(
        ClaimRefusal(
            code=AnswerCode.DATABASE_UNAVAILABLE.value, status=HTTPStatus.SERVICE_UNAVAILABLE
        ),
        id="database_unavailable",
    ),
]


def the_daemons_step(tmp_path: Path, plane: FakeControlPlane) -> tuple[str, bool]:
    harness = Harness(tmp_path, plane, StubUpdater(installed="1.4.1"), ManualClock(NOW))
    result = harness.daemon.tick()
    return result, harness.state().last_consumed is not None


def the_simulated_agents_step(plane: FakeControlPlane) -> tuple[str, bool]:
    agent = SimulatedAgent(
        agent_id=plane.agent_id,
        name="web-01",
        org_name="org",
        agent_key=CREDENTIAL,
        installed="1.4.1",
        base_url="http://control.test",
    )
    fleet = SimulatedFleet(
        [agent], clock=ManualClock(NOW), trusted_keys={}, transport=plane.transport()
    )

    async def one_minute() -> str:
        async with fleet.connected():
            return await fleet.tick(agent)

    result = asyncio.run(one_minute())
    return result, agent.last_consumed is not None


def expected_step(answer: ClaimRefusal) -> tuple[str, bool]:
    """Rule 8 read straight from the contract, so the comparison below cannot agree on a wrong
    answer: a slot-consuming code gives the slot up, the brake and the caps wait, anything
    else that is not a platform outage keeps the slot and waits too."""
    if answer.code == AnswerCode.DATABASE_UNAVAILABLE:
        # The control plane said it cannot serve: our outage, never throttled, never a refusal.
        return "platform_unavailable", False
    try:
        code = RefusalCode(answer.code)
    except ValueError:
        return "refused", False
    if code.consumes_slot:
        return "slot_gone", True
    if code.is_brake:
        return "braked", False
    return ("throttled" if code.is_cap else "refused"), False


@pytest.mark.parametrize("answer", ANSWERS)
def test_every_claim_answer_takes_the_same_step_in_the_daemon_and_the_simulated_fleet(
    tmp_path: Path, answer: ClaimRefusal
) -> None:
    daemon = the_daemons_step(
        tmp_path, FakeControlPlane(now=lambda: NOW, refuse_claims_with=answer)
    )
    simulated = the_simulated_agents_step(
        FakeControlPlane(now=lambda: NOW, refuse_claims_with=answer)
    )
    assert daemon == simulated == expected_step(answer)


@pytest.mark.parametrize(
    ("plane", "step"),
    [
        pytest.param({"online": False}, ("offline", False), id="offline"),
        pytest.param({"release_version": "1.4.1"}, ("up_to_date", True), id="nothing_to_do"),
        pytest.param({"brake_in_config": True}, ("braked", False), id="brake_in_config"),
        pytest.param({"enabled": False}, ("schedule_off", False), id="schedule_off"),
        pytest.param({}, ("dispatched", True), id="granted"),
    ],
)
def test_every_other_step_is_the_same_in_the_daemon_and_the_simulated_fleet(
    tmp_path: Path, plane: dict[str, object], step: tuple[str, bool]
) -> None:
    daemon = the_daemons_step(tmp_path, FakeControlPlane(now=lambda: NOW, **plane))  # type: ignore[arg-type]
    simulated = the_simulated_agents_step(FakeControlPlane(now=lambda: NOW, **plane))  # type: ignore[arg-type]
    assert daemon == simulated == step
