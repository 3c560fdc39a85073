"""The core's facts worded per language: schedule problems, daylight saving notes, runs, events."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from uuid import uuid4
from zoneinfo import ZoneInfo

import pytest

from control_plane.accounts.services import (
    FIRST_PANEL_KEY,
    UNNAMED_OPERATOR_KEY,
    UNNAMED_PANEL_KEY,
)
from control_plane.events.services import Actor, EventView
from control_plane.notifications.summary import SlotOutcome, notification_body
from control_plane.panel.event_wording import (
    NAMED_AGENTS,
    event_line,
    notification_agents,
    notification_lines,
)
from control_plane.panel.i18n import LANGUAGES, Language, choose_language
from control_plane.panel.operator_routes import ALWAYS_SHOWN, MISS_REASONS
from control_plane.panel.rollout_wording import hold_text, offer_basis
from control_plane.panel.schedule_editor import check_rows, preview
from control_plane.panel.wording import (
    key_name,
    miss_reason,
    outcome_reason,
    run_line,
    status_text,
    wall_time_note,
)
from control_plane.runs.views import RunView
from ground.contract import HoldView, MissReason, OutcomeReason, PatchFallbackReason
from shared_planner import describe_wall_time
from shared_planner.schedule_problems import ScheduleProblemKind, schedule_problem

AMSTERDAM = ZoneInfo("Europe/Amsterdam")


@pytest.mark.parametrize(
    ("values", "kind", "index"),
    [
        pytest.param(["03:07"], ScheduleProblemKind.OFF_GRID, 0, id="off_grid"),
        pytest.param(["03:00", "25:00"], ScheduleProblemKind.NOT_A_TIME, 1, id="not_a_time"),
        pytest.param(["3:00"], ScheduleProblemKind.NOT_A_TIME, 0, id="one_digit_hour"),
        pytest.param(["03:00", 3], ScheduleProblemKind.NOT_A_STRING, 1, id="number"),
        pytest.param(["03:00", "03:00"], ScheduleProblemKind.DUPLICATE, 1, id="duplicate"),
        pytest.param([], ScheduleProblemKind.EMPTY, None, id="empty"),
        pytest.param("03:00", ScheduleProblemKind.NOT_A_LIST, None, id="a_string"),
        pytest.param(
            [f"{m // 60:02d}:{m % 60:02d}" for m in range(0, 1440, 5)] * 2,
            ScheduleProblemKind.TOO_MANY,
            None,
            id="too_many",
        ),
    ],
)
def test_schedule_problem_names_kind_and_index(
    values: object, kind: ScheduleProblemKind, index: int | None
) -> None:
    problem = schedule_problem(values)
    assert problem is not None
    assert (problem.kind, problem.index) == (kind, index)


def test_a_valid_schedule_has_no_problem() -> None:
    assert schedule_problem(["03:00", "13:30"]) is None


def test_the_problem_is_placed_on_the_row_the_reader_sees() -> None:
    state = check_rows(Language("de"), enabled=True, rows=["03:00", "", "03:07"])
    assert list(state.row_errors) == [2]
    assert "Fünf-Minuten-Raster" in state.row_errors[2]


def test_an_enabled_schedule_without_times_is_a_list_problem() -> None:
    state = check_rows(Language("nl"), enabled=True, rows=["", " "])
    assert state.row_errors == {}
    assert state.list_error is not None
    assert "minstens één tijd" in state.list_error


def test_a_schedule_switched_off_may_be_empty() -> None:
    assert not check_rows(Language("en"), enabled=False, rows=[""]).has_errors


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param(
            "nl",
            "02:30 bestaat niet op 28 maart (de klok gaat een uur vooruit); "
            "de update draait om 03:30 CEST.",
            id="nl_spring_gap",
        ),
        pytest.param(
            "de",
            "02:30 gibt es am 28. März nicht (die Uhren werden vorgestellt); "
            "das Update läuft um 03:30 CEST.",
            id="de_spring_gap",
        ),
    ],
)
def test_the_spring_note_in_words(code: str, expected: str) -> None:
    wall = describe_wall_time(date(2027, 3, 28), time(2, 30), AMSTERDAM)
    assert wall_time_note(Language(code), wall, AMSTERDAM) == expected


def test_the_autumn_note_names_the_first_instant() -> None:
    wall = describe_wall_time(date(2026, 10, 25), time(2, 30), AMSTERDAM)
    note = wall_time_note(Language("fr"), wall, AMSTERDAM)
    assert note is not None
    assert "deux fois le 25 octobre" in note
    assert "02:30 CEST" in note


def test_an_ordinary_time_has_no_note() -> None:
    wall = describe_wall_time(date(2027, 3, 29), time(2, 30), AMSTERDAM)
    assert wall_time_note(Language("en"), wall, AMSTERDAM) is None


def test_the_preview_walks_the_spring_night() -> None:
    now = datetime(2027, 3, 26, 11, 0, tzinfo=UTC)
    nights = preview(Language("sv"), ["02:30", "03:30"], zone=AMSTERDAM, now=now)
    assert len(nights) == 7
    spring = next(n for n in nights if "28 mars" in n.heading)
    # 02:30 does not exist that night and runs at 03:30: one slot with two notes.
    assert len(spring.slots) == 1
    shown, notes = spring.slots[0]
    assert shown == "03:30 CEST"
    assert any("finns inte den 28 mars" in note for note in notes)
    assert any("en gång" in note for note in notes)


def _run(**changes: object) -> RunView:
    values: dict[str, object] = {
        "run_id": uuid4(),
        "agent_id": uuid4(),
        "trigger": "schedule",
        "slot_key": "2027-03-29T03:00",
        "slot_at": datetime(2027, 3, 29, 1, 0, tzinfo=UTC),
        "status": "up_to_date",
        "from_version": "1.4.0",
        "miss_reason": None,
        "version": "1.5.0",
        "release_version": None,
        "error": None,
        "created_at": datetime(2027, 3, 29, 1, 0, tzinfo=UTC),
        "claimed_at": None,
        "finished_at": None,
    }
    values.update(changes)
    return RunView(**values)  # type: ignore[arg-type]


def _event(kind: str, actor: str, at: datetime, **data: object) -> EventView:
    return EventView(
        id=1,
        kind=kind,
        actor=Actor(kind=actor, id=None),  # type: ignore[arg-type]
        run_id=None,
        at=at,
        data=dict(data),
    )


def test_runs_read_as_the_issue_asks() -> None:
    en = Language("en")
    assert run_line(en, _run(), AMSTERDAM).endswith("(scheduled) — already up to date")
    missed = run_line(en, _run(status="missed", miss_reason="offline"), AMSTERDAM)
    assert missed.endswith("missed: offline")
    assert "rolled back" in run_line(en, _run(status="rolled_back"), AMSTERDAM)


def test_a_slot_summary_says_each_outcome_some_agents_had_and_no_other() -> None:
    body = {
        "counts": {"agents": 7, "up_to_date": 2, "failed": 0, "rolled_back": 1, "no_outcome": 4},
        "updated": [],
    }
    assert notification_lines(Language("en"), body) == [
        "7 agents had this slot.",
        "2 already up to date.",
        "1 rolled back.",
        "4 without an outcome yet.",
    ]


def test_the_timeline_never_says_a_person_started_a_scheduled_update() -> None:
    en = Language("en")
    at = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
    scheduled = event_line(en, _event("update.scheduled", "schedule", at))
    succeeded = event_line(en, _event("update.succeeded", "schedule", at, version="2"))
    asked = event_line(en, _event("update.requested", "user", at))
    assert scheduled == "The schedule started an update."
    assert succeeded.startswith("Scheduled update")
    assert "asked" in asked


def test_a_promotion_to_a_wave_before_the_last_does_not_say_everyone() -> None:
    en = Language("en")
    at = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
    data = {"version": "1.6.0", "stage": "canary", "wave": 2, "waves": 4}
    moved = event_line(en, _event("release.promoted", "control_plane", at, **data))
    assert moved == "Release 1.6.0 moved on to wave 2 of 4."
    last = {"version": "1.6.0", "stage": "everyone", "wave": 4, "waves": 4}
    everyone = event_line(en, _event("release.promoted", "operator", at, **last))
    assert everyone == "Release 1.6.0 is now for everyone."


def test_the_timeline_never_says_the_customer_asked_for_an_update_an_operator_forced() -> None:
    en = Language("en")
    at = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
    asked = event_line(en, _event("update.started", "user", at, forced=False))
    forced = event_line(en, _event("update.started", "operator", at, forced=True))
    assert asked == "The agent started the update you asked for."
    assert forced == "The agent started the update our operators forced."


@pytest.mark.parametrize(
    ("chosen", "header", "expected"),
    [
        pytest.param(None, None, "en", id="nothing_is_english"),
        pytest.param(None, "de-CH, fr;q=0.8", "de", id="region_falls_back_to_language"),
        pytest.param(None, "ja, it;q=0.3", "it", id="first_we_speak"),
        pytest.param(None, "pl;q=0, sv;q=0.5", "sv", id="q_zero_is_refused"),
        pytest.param("nl", "de", "nl", id="the_choice_wins"),
        # A weight is 0 to 1 with at most three decimals in ASCII digits (RFC 9110): one written
        # otherwise does not rank its language above the others.
        pytest.param(None, "fr;q=2, de", "de", id="q_over_one"),
        pytest.param(None, "fr;q=inf, de", "de", id="q_infinite"),
        pytest.param(None, "fr;q=1e3, de", "de", id="q_exponent"),
        pytest.param(None, "fr;q=1_0, de", "de", id="q_underscore"),
        pytest.param(None, "de;q=0.5, fr;q=\u0661", "de", id="q_other_script"),
        pytest.param(None, "de;q=0.5, fr;q= 1", "de", id="q_space"),
        pytest.param(None, "de;q=0.5, fr;q=+1", "de", id="q_sign"),
        pytest.param(None, "fr;q=0.5, de;q=0.9", "de", id="q_decimals"),
        pytest.param(None, "fr;q=1.000, de;q=0.999", "fr", id="q_three_decimals"),
        pytest.param("xx", "fr", "fr", id="an_unknown_choice_is_ignored"),
    ],
)
def test_language_choice(chosen: str | None, header: str | None, expected: str) -> None:
    assert choose_language(chosen, header) == expected


@pytest.mark.parametrize("code", ["nl", "en", "de", "fr", "es", "it", "pt", "pl", "sv"])
def test_every_outcome_reason_has_its_own_words(code: str) -> None:
    """Each `OutcomeReason` reads as itself in each language, never the fallback."""
    lang = Language(code)
    fallback = lang.gettext("reason unknown")
    said = {reason: outcome_reason(lang, reason.value) for reason in OutcomeReason}
    assert fallback not in said.values()
    assert len(set(said.values())) == len(OutcomeReason)
    assert outcome_reason(lang, None) is None


@pytest.mark.parametrize(
    "reason", ["platform_unavailable", "held", "release_rolled_back", "release_halted"]
)
def test_the_newer_refusals_and_misses_have_words(reason: str) -> None:
    lang = Language("de")
    assert miss_reason(lang, reason) != lang.gettext("reason unknown")


@pytest.mark.parametrize("code", ["nl", "en", "de", "fr", "es", "it", "pt", "pl", "sv"])
def test_a_full_build_after_a_failed_patch_says_why_in_every_language(code: str) -> None:
    lang = Language(code)
    plain = status_text(lang, _run(status="succeeded"))
    said = {
        reason: status_text(
            lang, _run(status="succeeded", delivery="full", patch_fallback_reason=reason)
        )
        for reason in PatchFallbackReason
    }
    # Each reason reads as itself, beside the version, and a patch or a plain full build as before.
    assert len(set(said.values())) == len(PatchFallbackReason)
    assert all("1.5.0" in line and line != plain for line in said.values())
    assert lang.gettext("reason unknown") not in " ".join(said.values())
    assert status_text(lang, _run(status="succeeded", delivery="patch")) == plain
    if code == "en":
        assert said[PatchFallbackReason.PATCH_REFUSED] == (
            "updated to 1.5.0 as a full build after a failed patch: "
            "the patch did not make the signed build"
        )


def test_a_run_with_a_reason_says_why_and_unauthorised_is_not_a_success() -> None:
    lang = Language("en")
    failed = _run(status="rolled_back")
    object.__setattr__(failed, "reason", "health_check_failed")  # as a failed run carries it
    assert status_text(lang, failed) == (
        "rolled back: the new version was not healthy in time; the previous version keeps running"
    )
    unauthorised = _run(status="unauthorised")
    assert "not counted as an update" in status_text(lang, unauthorised)
    assert status_text(lang, _run(status="missed", miss_reason="held")) == (
        "missed: the agent is on hold"
    )


ROLLOUT_EVENTS: tuple[tuple[str, dict[str, object]], ...] = (
    ("hold.set", {"set_by": "customer", "until": "2027-04-02T00:00:00Z"}),
    ("hold.released", {}),
    ("pin.set", {"version": "1.4.0", "scope": "agent"}),
    ("pin.set", {"version": None, "scope": "org"}),
    ("pin.removed", {"version": "1.4.0"}),
    ("canary.marked", {"canary": True}),
    ("update.forced", {"reason": "hotfix"}),
)


@pytest.mark.parametrize("code", ["en", "nl", "de", "fr", "es", "it", "pt", "pl", "sv"])
def test_the_rollout_steps_on_a_timeline_have_their_own_words(code: str) -> None:
    lang = Language(code)
    other = lang.gettext("Other event (%(kind)s).", kind="x").replace("x", "")
    lines = [
        event_line(
            lang,
            EventView(
                id=n,
                kind=kind,
                actor=Actor(kind="operator", name="ops"),
                run_id=None,
                at=datetime(2027, 3, 26, tzinfo=UTC),
                data=data,
            ),
        )
        for n, (kind, data) in enumerate(ROLLOUT_EVENTS)
    ]
    assert not [line for line in lines if line.startswith(other.split("(")[0])]
    assert len(set(lines)) == len(lines)
    assert "1.4.0" in lines[2]


@pytest.mark.parametrize("code", ["en", "nl", "de", "fr", "es", "it", "pt", "pl", "sv"])
def test_a_hold_says_until_when_and_who_set_it(code: str) -> None:
    lang = Language(code)
    zone = ZoneInfo("Europe/Amsterdam")
    until = datetime(2027, 4, 2, tzinfo=zone)
    texts = {
        setter: hold_text(lang, HoldView(until=until, reason=None, set_by=setter), zone)
        for setter in ("agent", "customer", "operator")
    }
    assert len(set(texts.values())) == 3
    assert all(lang.moment(until, zone) in text for text in texts.values())
    assert offer_basis(lang, None) == "—"
    assert len({offer_basis(lang, b) for b in ("pinned", "current", "canary", "previous")}) == 4


def test_the_miss_chart_has_a_place_for_every_miss_reason() -> None:
    assert sorted(MISS_REASONS) == sorted(reason.value for reason in MissReason)
    assert set(MISS_REASONS) >= ALWAYS_SHOWN


def test_a_notification_names_failures_first_then_misses_and_cuts_the_list_short() -> None:
    en = Language("en")
    body = {
        "failed": [
            {"agent_id": "a", "name": "db-1", "status": "failed", "reason": None},
            {"agent_id": "b", "name": "db-2", "status": "unauthorised"},
        ],
        "missed": [
            {"agent_id": f"m{n}", "name": f"web-{n:02d}", "reason": "offline"} for n in range(12)
        ],
        "no_outcome": [{"agent_id": "c", "name": "slow"}],
        "not_updated_for_three_days": [{"agent_id": "d", "name": "quiet"}],
    }
    named = notification_agents(en, body)
    assert [(a.name, a.what) for a in named.agents[:3]] == [
        ("db-1", "failed"),
        ("db-2", "switched after its permission ended; recorded, not counted as an update"),
        ("web-00", "missed: offline"),
    ]
    assert len(named.agents) == NAMED_AGENTS
    assert named.more == 2 + 12 + 2 - NAMED_AGENTS


def test_the_timeline_says_why_a_night_was_missed() -> None:
    at = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
    missed = event_line(Language("nl"), _event("update.missed", "schedule", at, reason="offline"))
    assert missed.startswith("Het tijdstip is gemist: ")
    assert event_line(Language("en"), _event("update.missed", "schedule", at)) == (
        "The slot was missed."
    )


@pytest.mark.parametrize("code", [code for code in LANGUAGES if code != "en"])
def test_a_key_the_control_plane_named_is_named_in_the_readers_language(code: str) -> None:
    lang = Language(code)
    for generated in (FIRST_PANEL_KEY, UNNAMED_PANEL_KEY, UNNAMED_OPERATOR_KEY):
        assert key_name(lang, generated) != generated
    # A name someone gave is theirs, even one that starts like a generated one.
    assert key_name(lang, "first panel key of Bram") == "first panel key of Bram"


def test_a_self_update_rolled_back_says_so_and_why_in_every_language() -> None:
    at = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
    event = _event(
        "update.rolled_back",
        "schedule",
        at,
        version="2.0.0",
        reason="health_check_failed",
        product="updater",
    )
    en = event_line(Language("en"), event)
    assert en.startswith("The update of nachtwacht's own agent was rolled back: ")
    assert en != event_line(Language("en"), _event("update.rolled_back", "schedule", at))
    for code in ("de", "es", "fr", "it", "nl", "pl", "pt", "sv"):
        assert event_line(Language(code), event) != en, code


def test_a_notification_names_a_host_whose_own_agents_update_rolled_back_and_why() -> None:
    at = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
    rolled = SlotOutcome(
        agent_id=uuid4(),
        agent_name="db-01",
        status="rolled_back",
        version="2.0.0",
        outcome_reason="health_check_failed",
        product="updater",
    )
    managed = SlotOutcome(
        agent_id=uuid4(),
        agent_name="db-02",
        status="rolled_back",
        version="1.4.1",
        outcome_reason="health_check_failed",
    )
    body = notification_body(
        slot_key="2027-03-29T03:00",
        slot_at=at,
        zone=ZoneInfo("Europe/Amsterdam"),
        outcomes=[rolled, managed],
        newly_named_failures=[rolled.agent_id, managed.agent_id],
        stale=[],
    )
    named = {a.name: a.what for a in notification_agents(Language("en"), body).agents}
    assert named["db-01"].startswith("its own nachtwacht agent's update rolled back: ")
    assert named["db-02"].startswith("rolled back: ")
    assert named["db-01"].split(": ", 1)[1] == named["db-02"].split(": ", 1)[1]
