"""The rollback floor per release key: the floor under the keys trusted now."""

from __future__ import annotations

from datetime import UTC, datetime

from agent_daemon.updater.updater_state import RecordedOutcome, UpdaterState

AT = datetime(2026, 12, 1, tzinfo=UTC)
DONE = RecordedOutcome(run_id="r", status="succeeded", version="1.5.0", error=None)


def _accepted(state: UpdaterState, manifest_version: int, signer: str | None) -> UpdaterState:
    return state.finished(DONE, floor=manifest_version, signer=signer, at=AT)


def test_a_file_from_before_floors_per_key_keeps_its_floor() -> None:
    assert UpdaterState(floor=40).floor_for(["a"]) == 40
    assert UpdaterState().floor_for(["a"]) is None


def test_the_floor_is_the_highest_under_the_keys_still_trusted() -> None:
    state = _accepted(_accepted(UpdaterState(floor=40), 2**62, "a"), 70, "b")
    assert state.floors == {"a": 2**62, "b": 70}
    assert state.floor == 2**62  # the highest accepted, for the record
    assert state.floor_for(["a", "b"]) == 2**62
    assert state.floor_for(["b"]) == 70  # a dropped: its floor goes with it
    assert state.floor_for(["c"]) is None  # every key that set a floor was dropped


def test_a_key_floor_only_rises() -> None:
    state = _accepted(_accepted(UpdaterState(), 70, "b"), 50, "b")
    assert state.floors == {"b": 70}


def test_an_older_state_file_reads_and_a_new_one_round_trips() -> None:
    old = UpdaterState.model_validate({"floor": 40, "builds": {}, "bad_versions": {}})
    assert old.floors == {}
    new = _accepted(old, 41, "a")
    assert UpdaterState.model_validate_json(new.model_dump_json()) == new
