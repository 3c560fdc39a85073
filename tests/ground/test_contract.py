"""The contract between the programs: one answer to each question, and its guards with the inputs
they exist to stop."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from ground.contract import (
    DEFAULT_TRACK,
    AgentConfig,
    ClaimGrant,
    ClaimRequest,
    ErrorAnswer,
    InstantError,
    OfferReason,
    RefusalCode,
    ReleaseTrack,
    format_instant,
    parse_instant,
)
from ground.limits import MAX_TIMES


def _config(**changes: object) -> dict[str, object]:
    document: dict[str, object] = {
        "agent_id": str(uuid.uuid4()),
        "schedule": {"enabled": True, "times": ["03:00"]},
        "timezone": "Europe/Amsterdam",
        "catch_up_minutes": 15,
        "brake": {"engaged": False},
        "server_time": "2026-11-30T02:00:00Z",
    }
    document.update(changes)
    return document


# -- which refusals consume the slot --------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "consumes"),
    [
        pytest.param(RefusalCode.NOT_A_SLOT, True, id="not_a_slot"),
        pytest.param(RefusalCode.WINDOW_CLOSED, True, id="window_closed"),
        pytest.param(RefusalCode.SLOT_CONSUMED, True, id="slot_consumed"),
        pytest.param(RefusalCode.BRAKE, False, id="brake"),
        pytest.param(RefusalCode.ORG_CAP, False, id="org_cap"),
        pytest.param(RefusalCode.GLOBAL_CAP, False, id="global_cap"),
        pytest.param(RefusalCode.NO_RELEASE, False, id="no_release"),
        pytest.param(RefusalCode.RUN_NOT_FOUND, False, id="run_not_found"),
        pytest.param(RefusalCode.RUN_FINISHED, False, id="run_finished"),
        pytest.param(RefusalCode.HELD, True, id="held"),
        pytest.param(RefusalCode.RELEASE_ROLLED_BACK, True, id="release_rolled_back"),
        # A stopped release is nothing to do tonight: the next slot asks again.
        pytest.param(RefusalCode.RELEASE_HALTED, True, id="release_halted"),
    ],
)
def test_each_refusal_says_whether_it_consumes_the_slot(code: RefusalCode, consumes: bool) -> None:
    assert code.consumes_slot is consumes


def test_every_refusal_has_a_status() -> None:
    assert {code.status for code in RefusalCode} <= {404, 409, 422, 429, 503}
    assert [code for code in RefusalCode if code.is_cap] == [
        RefusalCode.ORG_CAP,
        RefusalCode.GLOBAL_CAP,
    ]


def test_an_unknown_refusal_code_is_not_a_refusal_the_agent_knows() -> None:
    answer = ErrorAnswer.model_validate({"detail": {"code": "new_in_v2", "message": "later"}})
    assert answer.detail.refusal is None
    known = ErrorAnswer.model_validate({"detail": {"code": "org_cap", "message": "full"}})
    assert known.detail.refusal is RefusalCode.ORG_CAP


# -- the instant on the wire -----------------------------------------------------------------------


def test_an_instant_is_written_in_utc_with_a_z_to_the_second() -> None:
    cet = timezone(timedelta(hours=1))
    assert format_instant(datetime(2026, 11, 30, 3, 0, 0, 999_999, tzinfo=cet)) == (
        "2026-11-30T02:00:00Z"
    )


def test_a_naive_instant_is_never_written() -> None:
    with pytest.raises(InstantError, match="no time zone"):
        format_instant(datetime(2026, 11, 30, 2, 0))


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-11-30T02:00:00Z", id="z"),
        pytest.param("2026-11-30T03:00:00+01:00", id="offset"),
        pytest.param("2026-11-30T02:00:00.000+00:00", id="fraction"),
    ],
)
def test_an_instant_with_an_offset_is_read_in_utc(text: str) -> None:
    assert parse_instant(text) == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("2026-11-30T02:00:00", id="naive_means_another_instant_on_each_host"),
        pytest.param("yesterday", id="not_a_time"),
        pytest.param("", id="empty"),
        pytest.param("2" * 5000, id="five_thousand_digits"),
        pytest.param(1764468000, id="a_number"),
        pytest.param(None, id="null"),
    ],
)
def test_a_reading_that_is_not_an_instant_is_refused_by_name(text: object) -> None:
    with pytest.raises(InstantError, match=r"^X-Field: ") as refused:
        parse_instant(text, field="X-Field")
    assert len(str(refused.value)) < 200  # an absurd value is shortened, never echoed whole


# -- the config answer: untrusted input, bounded ---------------------------------------------------


def test_a_config_answer_round_trips_with_instants_in_the_wire_form() -> None:
    config = AgentConfig.model_validate(_config())
    assert config.server_time == datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    assert config.model_dump(mode="json")["server_time"] == "2026-11-30T02:00:00Z"


def test_a_config_answer_with_fields_from_a_newer_control_plane_still_parses() -> None:
    assert AgentConfig.model_validate(_config(added_in_v2={"x": 1})).timezone == "Europe/Amsterdam"


def test_an_offer_reason_from_a_newer_control_plane_still_parses_as_unknown() -> None:
    config = AgentConfig.model_validate(
        _config(offer_note={"reason": "moon_phase", "newest_version": "1.6.0"})
    )
    assert config.offer_note is not None
    assert config.offer_note.reason == "moon_phase"
    assert config.offer_note.known_reason is None


def test_an_offer_reason_the_agent_knows_is_read_as_one() -> None:
    config = AgentConfig.model_validate(_config(offer_note={"reason": "pinned"}))
    assert config.offer_note is not None
    assert config.offer_note.known_reason is OfferReason.PINNED


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"catch_up_minutes": 1440}, "catch_up_minutes", id="window_of_a_whole_day"),
        pytest.param({"catch_up_minutes": 0}, "catch_up_minutes", id="window_of_nothing"),
        pytest.param({"catch_up_minutes": True}, "catch_up_minutes", id="boolean_window"),
        pytest.param({"timezone": "localtime"}, "timezone", id="host_dependent_zone"),
        pytest.param({"timezone": "Mars/Olympus"}, "timezone", id="unknown_zone"),
        pytest.param({"timezone": "../../etc/passwd"}, "timezone", id="zone_path_escape"),
        pytest.param(
            {"schedule": {"enabled": True, "times": ["03:07"]}}, "schedule", id="off_the_grid"
        ),
        pytest.param(
            {"schedule": {"enabled": True, "times": ["03:00", "03:00"]}},
            "schedule",
            id="duplicate_time",
        ),
        pytest.param({"schedule": {"enabled": True, "times": []}}, "schedule", id="on_but_empty"),
        pytest.param({"schedule": {"enabled": True, "times": [3]}}, "schedule", id="number_time"),
        pytest.param(
            {"schedule": {"enabled": True, "times": ["03:00\n"]}}, "schedule", id="trailing_newline"
        ),
        pytest.param(
            {"schedule": {"enabled": True, "times": ["00:00"] * (MAX_TIMES + 1)}},
            "schedule",
            id="more_times_than_a_day_has",
        ),
        pytest.param({"server_time": "2026-11-30T02:00:00"}, "server_time", id="naive_time"),
        pytest.param({"agent_id": "not-a-uuid"}, "agent_id", id="agent_id_not_a_uuid"),
        pytest.param(
            {"offer_note": {"reason": "x" * 65}}, "offer_note.reason", id="absurd_offer_reason"
        ),
        pytest.param({"offer_note": {"reason": ""}}, "offer_note.reason", id="empty_offer_reason"),
        pytest.param(
            {"offer_note": {"reason": "wave", "newest_version": "v" * 1000}},
            "offer_note.newest_version",
            id="absurd_newest_version",
        ),
    ],
)
def test_a_config_answer_outside_the_contract_is_refused_naming_the_field(
    changes: dict[str, object], field: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        AgentConfig.model_validate(_config(**changes))
    assert field in str(refused.value)


def test_a_switched_off_schedule_may_hold_no_times() -> None:
    config = AgentConfig.model_validate(_config(schedule={"enabled": False, "times": []}))
    assert config.schedule.times == ()


# -- claims ---------------------------------------------------------------------------------------


def test_a_claim_names_a_slot_or_a_manual_update_never_both() -> None:
    assert ClaimRequest(slot_key="2026-11-30T03:00").manual_run_id is None
    with pytest.raises(ValidationError, match="exactly one"):
        ClaimRequest(slot_key="2026-11-30T03:00", manual_run_id=uuid.uuid4())
    with pytest.raises(ValidationError, match="exactly one"):
        ClaimRequest()


def test_a_claim_request_with_an_unknown_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="slot"):
        ClaimRequest.model_validate({"slot": "2026-11-30T03:00"})


def test_a_grant_with_a_manifest_of_absurd_size_is_refused() -> None:
    grant = {
        "run_id": str(uuid.uuid4()),
        "token": {"id": str(uuid.uuid4()), "expires_at": "2026-11-30T03:00:00Z"},
        "release": {
            "version": "1.5.0",
            "manifest_version": 42,
            "manifest_b64": "A" * 2_000_000,
            "signature_b64": "",
            "artifact_url": "/v1/agent/runs/x/artifact",
        },
    }
    with pytest.raises(ValidationError, match="manifest_b64"):
        ClaimGrant.model_validate(grant)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        pytest.param({"brake": {"engaged": 1}}, "engaged", id="number_as_switch"),
        pytest.param({"schedule": {"enabled": "yes", "times": []}}, "enabled", id="text_as_switch"),
    ],
)
def test_a_switch_of_the_wrong_type_is_refused(changes: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError, match=field):
        AgentConfig.model_validate(_config(**changes))


def test_a_claims_pair_is_the_default_when_it_names_none_and_a_bad_name_is_refused_each_time() -> (
    None
):
    assert ClaimRequest(slot_key="2026-11-30T03:00").track == DEFAULT_TRACK
    named = ClaimRequest(slot_key="2026-11-30T03:00", channel="beta", platform="linux-arm64")
    assert named.track == ReleaseTrack(channel="beta", platform="linux-arm64")
    for _ in range(2):  # a refused name is never remembered as a pair
        with pytest.raises(ValidationError):
            ReleaseTrack.of("no spaces allowed", None)
