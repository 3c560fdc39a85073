"""How the panel words a release's stop, in every language: a slot skipped because its release
was stopped names that release (its rollout stopped, not every update), a release's own brake is
not the platform's, and an automatic halt is not the operators'. German keeps one meaning per
word: "angehalten" is a halt, "pausiert" a hold (the brake is "gebremst" or the "Notbremse");
Polish too: "zatrzymane" is a halt, "wstrzymane" a hold, "hamulec" the brake (a stop that may be
either a halt or the release's brake is "przerwane")."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
from babel.messages.pofile import read_po

from control_plane.events.services import EventView
from control_plane.events.trail import Actor
from control_plane.panel.event_wording import event_line
from control_plane.panel.i18n import LANGUAGES, Language
from control_plane.panel.wording import miss_reason, status_text
from control_plane.runs.views import RunView

AT = datetime(2027, 3, 29, 1, 0, tzinfo=UTC)
LOCALES = Path(__file__).resolve().parents[2] / "control_plane" / "panel" / "locales"


def _skipped(version: str | None, stopped_by: str | None = None) -> RunView:
    return RunView(
        run_id=uuid4(),
        agent_id=uuid4(),
        trigger="schedule",
        slot_key="2027-03-29T03:00",
        slot_at=AT,
        status="skipped",
        from_version="1.5.0",
        release_version=version,
        version="1.5.0",
        error=None,
        miss_reason=None,
        skip_reason="release_halted",
        stopped_by=stopped_by,
        created_at=AT,
        claimed_at=None,
        finished_at=AT,
    )


def _event(kind: str, actor: str, **data: object) -> EventView:
    return EventView(
        id=1,
        kind=kind,
        actor=Actor(kind=actor, name=actor),
        run_id=None,
        at=AT,
        data=data,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_slot_skipped_for_a_stopped_release_names_that_release(code: str) -> None:
    lang = Language(code)
    text = status_text(lang, _skipped("1.6.0"))
    assert "1.6.0" in text
    # Not the platform brake's words: only this release's rollout stopped.
    assert miss_reason(lang, "brake") not in text
    # Without the release on record, still a sentence (the shared words), never the version.
    assert "1.6.0" not in status_text(lang, _skipped(None))
    skipped = event_line(
        lang, _event("update.skipped", "schedule", reason="release_halted", release_version="1.6.0")
    )
    assert "1.6.0" in skipped


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_slot_skipped_says_whether_a_halt_or_the_releases_brake_stopped_it(code: str) -> None:
    """The agent is answered `release_halted` either way; the customer reads which, since a halt
    is resumed and a brake released."""
    lang = Language(code)
    runs = [status_text(lang, _skipped("1.6.0", by)) for by in ("halt", "brake", None)]
    events = [
        event_line(
            lang,
            _event(
                "update.skipped",
                "schedule",
                reason="release_halted",
                release_version="1.6.0",
                **({"stopped_by": by} if by else {}),
            ),
        )
        for by in ("halt", "brake", None)
    ]
    for said in (runs, events):
        assert all("1.6.0" in text for text in said), said
        assert len(set(said)) == 3, said
    # A value a newer release may write reads as the shared words, never an error.
    assert status_text(lang, _skipped("1.6.0", "withdrawn")) == runs[2]


@pytest.mark.parametrize("code", LANGUAGES)
def test_a_releases_own_brake_is_worded_apart_from_the_platforms(code: str) -> None:
    lang = Language(code)
    platform = event_line(lang, _event("brake.engaged", "operator", scope="platform"))
    own = event_line(lang, _event("brake.engaged", "operator", scope="release", version="1.6.0"))
    assert "1.6.0" in own
    assert own != platform
    released = event_line(
        lang, _event("brake.released", "operator", scope="release", version="1.6.0")
    )
    assert "1.6.0" in released
    assert released != event_line(lang, _event("brake.released", "operator", scope="platform"))


@pytest.mark.parametrize("code", LANGUAGES)
def test_an_automatic_halt_is_not_worded_as_the_operators(code: str) -> None:
    lang = Language(code)
    by_hand = event_line(
        lang, _event("release.halted", "operator", version="1.6.0", cause="operator")
    )
    automatic = event_line(
        lang, _event("release.halted", "automatic", version="1.6.0", cause="errors")
    )
    assert "1.6.0" in automatic
    assert automatic != by_hand


def test_german_uses_each_word_for_one_state() -> None:
    with (LOCALES / "de" / "LC_MESSAGES" / "messages.po").open("rb") as po:
        catalog = read_po(po)
    mixed = []
    for message in catalog:
        if not message.id:
            continue
        english = " ".join(message.id if isinstance(message.id, tuple) else (message.id,))
        german = " ".join(
            message.string if isinstance(message.string, tuple) else (message.string,)
        )
        if re.search(r"(?i)angehalten|anhalten|anhält", german) and not re.search(
            r"(?i)\bhalt", english
        ):
            mixed.append(f"halt word for: {english}")
        if re.search(r"(?i)pausier|pause", german) and not re.search(r"(?i)\bhold|\bheld", english):
            mixed.append(f"hold word for: {english}")
    assert mixed == []


def _entries(code: str) -> list[tuple[str, str]]:
    """Each entry of the language's catalogue as (English, translation), plural forms joined."""
    with (LOCALES / code / "LC_MESSAGES" / "messages.po").open("rb") as po:
        catalog = read_po(po)
    return [
        (
            " ".join(message.id if isinstance(message.id, tuple) else (message.id,)),
            " ".join(message.string if isinstance(message.string, tuple) else (message.string,)),
        )
        for message in catalog
        if message.id
    ]


def test_polish_uses_each_word_for_one_state() -> None:
    mixed = []
    for english, polish in _entries("pl"):
        halt = re.search(r"(?i)\bhalt", english)
        if re.search(r"(?i)zatrzym", polish) and not halt:
            mixed.append(f"halt word for: {english}")
        if halt and not re.search(r"(?i)zatrzym", polish):
            mixed.append(f"no halt word for: {english}")
        if re.search(r"(?i)wstrzym", polish) and not re.search(r"(?i)\bhold|\bheld", english):
            mixed.append(f"hold word for: {english}")
        # The brake, the platform's or a release's own: in English a brake or a pause (and the
        # rollout resumed: a release's own brake released).
        brake = re.search(r"(?i)brake|paus|resumed the rollout", english)
        if re.search(r"(?i)hamul|hamow", polish) and not brake:
            mixed.append(f"brake word for: {english}")
    assert mixed == []
