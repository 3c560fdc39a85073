"""The one table of the reasons' words: every reason has its sentence, and both programs say it."""

from __future__ import annotations

from agent_daemon.host.status import describe_reason
from control_plane.panel.i18n import Language
from control_plane.panel.wording import miss_reason, outcome_reason
from ground.contract import MissReason, OfferReason, OutcomeReason, RefusalCode
from ground.contract.wording import (
    MISS_REASON_WORDS,
    OFFER_REASON_WORDS,
    OUTCOME_REASON_WORDS,
    SKIP_REASON_WORDS,
    UNKNOWN_REASON_WORDS,
)


def test_every_outcome_reason_has_its_sentence() -> None:
    assert set(OUTCOME_REASON_WORDS) == set(OutcomeReason)


def test_every_miss_reason_has_its_sentence() -> None:
    assert set(MISS_REASON_WORDS) == set(MissReason)


def test_every_reason_an_agent_is_not_updated_to_the_newest_has_its_sentence() -> None:
    assert set(OFFER_REASON_WORDS) == set(OfferReason)


def test_every_refusal_that_skips_a_slot_has_its_sentence() -> None:
    assert {RefusalCode.HELD, RefusalCode.RELEASE_ROLLED_BACK} <= set(SKIP_REASON_WORDS)


def test_the_panel_and_the_agent_say_an_outcome_reason_alike() -> None:
    english = Language("en")
    for reason, words in OUTCOME_REASON_WORDS.items():
        assert outcome_reason(english, reason.value) == words
        assert describe_reason(reason.value) == words


def test_the_panel_says_a_miss_reason_in_the_tables_words() -> None:
    english = Language("en")
    for reason, words in MISS_REASON_WORDS.items():
        assert miss_reason(english, reason.value) == words
    assert miss_reason(english, "solar_flare") == UNKNOWN_REASON_WORDS
