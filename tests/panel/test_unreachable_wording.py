"""A slot missed by an agent that ran but could not reach the control plane, said in every
language: what happened, the agent's error where the miss keeps it, and what to do — in the run
line, the timeline and the notification's named agents."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4
from zoneinfo import ZoneInfo

import pytest

from control_plane.events.services import Actor, EventView
from control_plane.notifications.summary import SlotOutcome, notification_body
from control_plane.panel.event_wording import event_line, notification_agents
from control_plane.panel.i18n import LANGUAGES, Language
from control_plane.panel.wording import miss_reason, run_line
from control_plane.runs.views import RunView
from ground.contract import MissReason

AT = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
AMSTERDAM = ZoneInfo("Europe/Amsterdam")
ERROR = "GET /v1/agent/config: cannot connect ([Errno 111] Connection refused)"


def _missed(data: dict[str, object]) -> EventView:
    return EventView(
        id=1, kind="update.missed", actor=Actor(kind="schedule"), run_id=None, at=AT, data=data
    )


def _run(error: str | None) -> RunView:
    return RunView(
        run_id=uuid4(),
        agent_id=uuid4(),
        trigger="schedule",
        slot_key="2026-11-30T03:00",
        slot_at=datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
        status="missed",
        from_version=None,
        miss_reason="unreachable",
        version=None,
        release_version=None,
        error=error,
        created_at=AT,
        claimed_at=None,
        finished_at=AT,
    )


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_reason_is_worded_in_every_language(code: str) -> None:
    lang = Language(code)
    worded = miss_reason(lang, "unreachable")
    assert worded not in {lang.gettext("reason unknown"), lang.gettext("offline")}
    if code != "en":
        assert worded != miss_reason(Language("en"), "unreachable"), "not translated"


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_run_the_timeline_and_the_notification_carry_the_agents_error(code: str) -> None:
    lang = Language(code)
    line = run_line(lang, _run(ERROR), AMSTERDAM)
    assert ERROR in line
    event = event_line(
        lang, _missed({"slot_key": "x", "reason": "unreachable", "unreachable_error": ERROR})
    )
    assert ERROR in event
    body = {
        "missed": [
            {"agent_id": "a", "name": "web-01", "reason": "unreachable", "unreachable_error": ERROR}
        ]
    }
    (named,) = notification_agents(lang, body).agents
    assert ERROR in named.what
    if code != "en":
        assert line != run_line(Language("en"), _run(ERROR), AMSTERDAM), "not translated"


def test_the_english_words() -> None:
    lang = Language("en")
    assert run_line(lang, _run(ERROR), AMSTERDAM).endswith(
        "missed: the agent was running but could not reach our control plane"
        f" ({ERROR}); check the host's proxy, firewall and DNS, or our status page"
    )
    # Without the error (a replica that kept none): the reason alone.
    assert run_line(lang, _run(None), AMSTERDAM).endswith(
        "missed: the agent was running but could not reach our control plane; check the host's"
        " proxy, firewall and DNS, or our status page"
    )


def test_an_error_with_control_characters_is_shown_not_obeyed() -> None:
    line = event_line(
        Language("en"),
        _missed({"reason": "unreachable", "unreachable_error": "refused\x1b[2J all is well"}),
    )
    assert "\x1b" not in line
    assert "refused\ufffd[2J all is well" in line


def test_the_notification_body_keeps_the_error_of_an_unreachable_miss_only() -> None:
    outcomes = [
        SlotOutcome(
            agent_id=uuid4(),
            agent_name="web-01",
            status="missed",
            miss_reason=MissReason.UNREACHABLE,
            error=ERROR,
        ),
        SlotOutcome(
            agent_id=uuid4(), agent_name="web-02", status="missed", miss_reason=MissReason.OFFLINE
        ),
    ]
    body = notification_body(
        slot_key="2026-11-30T03:00",
        slot_at=AT,
        zone=AMSTERDAM,
        outcomes=outcomes,
        newly_named_failures=(),
        stale=(),
    )
    first, second = body["missed"]
    assert first["unreachable_error"] == ERROR
    assert "unreachable_error" not in second
