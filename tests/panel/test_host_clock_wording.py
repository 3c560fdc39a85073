"""A slot missed because the host's clock was more than a day off, said in every language: what
happened and what to do, with how far off where the miss's event keeps it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control_plane.events.services import Actor, EventView
from control_plane.panel.event_wording import event_line, notification_agents
from control_plane.panel.i18n import LANGUAGES, Language
from control_plane.panel.wording import host_clock_marker, host_clock_notice, miss_reason

AT = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
THREE_DAYS_TWO_HOURS = 3 * 86_400 + 2 * 3_600


def _missed(data: dict[str, object]) -> EventView:
    return EventView(
        id=1, kind="update.missed", actor=Actor(kind="schedule"), run_id=None, at=AT, data=data
    )


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_reason_is_worded_in_every_language(code: str) -> None:
    lang = Language(code)
    worded = miss_reason(lang, "host_clock")
    assert worded != lang.gettext("reason unknown")
    if code != "en":
        assert worded != miss_reason(Language("en"), "host_clock"), "not translated"


@pytest.mark.parametrize("code", LANGUAGES)
@pytest.mark.parametrize("offset", [-THREE_DAYS_TWO_HOURS, THREE_DAYS_TWO_HOURS])
def test_the_timeline_says_how_far_off_and_which_way(code: str, offset: int) -> None:
    lang = Language(code)
    line = event_line(
        lang,
        _missed({"slot_key": "x", "reason": "host_clock", "host_clock_offset_seconds": offset}),
    )
    assert lang.duration(timedelta(seconds=abs(offset))) in line
    other = event_line(
        lang,
        _missed({"slot_key": "x", "reason": "host_clock", "host_clock_offset_seconds": -offset}),
    )
    assert line != other  # behind is not ahead
    assert miss_reason(lang, "host_clock") not in line


def test_the_english_words() -> None:
    lang = Language("en")
    line = event_line(
        lang,
        _missed({"reason": "host_clock", "host_clock_offset_seconds": -THREE_DAYS_TWO_HOURS}),
    )
    assert line == (
        "The slot was missed: the host's clock was 3 days 2 hours behind; set up time"
        " synchronisation on the host."
    )


@pytest.mark.parametrize("offset", [None, "3 days", True, 1.5])
def test_an_event_without_a_usable_offset_says_the_reason_without_it(offset: object) -> None:
    lang = Language("en")
    data: dict[str, object] = {"reason": "host_clock"}
    if offset is not None:
        data["host_clock_offset_seconds"] = offset
    line = event_line(lang, _missed(data))
    assert line == f"The slot was missed: {miss_reason(lang, 'host_clock')}."


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_notification_names_the_agent_with_the_reason(code: str) -> None:
    lang = Language(code)
    body = {"missed": [{"agent_id": "a", "name": "web-01", "reason": "host_clock"}]}
    (named,) = notification_agents(lang, body).agents
    assert miss_reason(lang, "host_clock") in named.what


def test_a_notification_says_how_far_off_where_its_body_has_it() -> None:
    lang = Language("en")
    entry = {"agent_id": "a", "name": "web-01", "reason": "host_clock"}
    body = {"missed": [{**entry, "host_clock_offset_seconds": THREE_DAYS_TWO_HOURS}]}
    (named,) = notification_agents(lang, body).agents
    assert named.what == (
        "missed: the host's clock was 3 days 2 hours ahead; set up time synchronisation on the host"
    )


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_notice_and_the_marker_say_how_far_off_and_which_way(code: str) -> None:
    lang = Language(code)
    offset = lang.duration(timedelta(seconds=THREE_DAYS_TWO_HOURS))
    for say in (host_clock_notice, host_clock_marker):
        behind, ahead = say(lang, -THREE_DAYS_TWO_HOURS), say(lang, THREE_DAYS_TWO_HOURS)
        assert offset in behind and offset in ahead
        assert behind != ahead  # behind is not ahead
        if code != "en":
            assert behind != say(Language("en"), -THREE_DAYS_TWO_HOURS), "not translated"


def test_the_english_notice() -> None:
    lang = Language("en")
    assert host_clock_notice(lang, -THREE_DAYS_TWO_HOURS) == (
        "This host's clock is 3 days 2 hours behind: its scheduled updates are missed, tonight's"
        " too, until the clock is set right."
    )
    assert host_clock_marker(lang, THREE_DAYS_TWO_HOURS) == "host's clock 3 days 2 hours ahead"
