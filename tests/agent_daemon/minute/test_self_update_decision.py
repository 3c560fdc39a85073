"""The slot's decision when the config offers an updater release (nachtwacht's own agent): the
updater goes first, one update per slot."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from agent_daemon.minute.decision import AgentFacts, ClaimSlot, NothingToDo, Wait, decide
from ground.contract import AgentConfig, BrakeView, ReleaseView, ScheduleView
from shared_planner import Slot, due_slot

NOW = datetime(2026, 11, 30, 2, 1, tzinfo=UTC)


def _slot() -> Slot:
    slot = due_slot(["03:00"], now=NOW, tz="Europe/Amsterdam")
    assert slot is not None
    return slot


SLOT = _slot()


def config(
    *, release: str | None = "1.5.0", updater: str | None = "2.1.0", brake: bool = False
) -> AgentConfig:
    return AgentConfig(
        agent_id=uuid.UUID("4b1c9a6e-0000-4000-8000-000000000001"),
        schedule=ScheduleView(enabled=True, times=("03:00",)),
        timezone="Europe/Amsterdam",
        catch_up_minutes=15,
        brake=BrakeView(engaged=brake),
        release=None if release is None else ReleaseView(version=release, manifest_version=42),
        updater_release=None
        if updater is None
        else ReleaseView(version=updater, manifest_version=50),
    )


def facts(**overrides: object) -> AgentFacts:
    fields: dict[str, object] = {
        "last_consumed_at": None,
        "installed_version": "1.4.1",
        "updater_version": "2.0.0",
        "updater_floor": 49,
    }
    fields.update(overrides)
    return AgentFacts(**fields)  # type: ignore[arg-type]


def test_the_updater_release_takes_the_slot_before_the_agents() -> None:
    action = decide(facts(), config(), None, NOW)
    assert action == ClaimSlot(slot=SLOT, from_version="2.0.0", product="updater")


def test_a_current_updater_leaves_the_slot_to_the_managed_agent() -> None:
    action = decide(facts(updater_version="2.1.0", updater_floor=50), config(), None, NOW)
    assert action == ClaimSlot(slot=SLOT, from_version="1.4.1")


def test_a_host_that_cannot_update_itself_claims_only_the_managed_agent() -> None:
    # No self-update mechanism: the version of its own agent is not known.
    action = decide(facts(updater_version=None), config(), None, NOW)
    assert action == ClaimSlot(slot=SLOT, from_version="1.4.1")


def test_both_current_is_nothing_to_do() -> None:
    action = decide(
        facts(installed_version="1.5.0", updater_version="2.1.0", updater_floor=50),
        config(),
        None,
        NOW,
    )
    assert isinstance(action, NothingToDo)


def test_the_brake_stops_a_self_update_too() -> None:
    action = decide(facts(), config(brake=True), None, NOW)
    assert isinstance(action, Wait)
    assert action.reason == "braked"


def test_no_updater_release_offered_is_the_managed_agents_slot() -> None:
    action = decide(facts(), config(updater=None), None, NOW)
    assert action == ClaimSlot(slot=SLOT, from_version="1.4.1")
