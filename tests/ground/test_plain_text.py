"""Plain text: every one of Unicode's control characters is found, and nothing else is."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from pydantic import BaseModel, Field, ValidationError

from ground.contract.plain_text import (
    PLAIN_TEXT_PATTERN,
    clipped,
    first_bidi_control,
    first_control_character,
    inert,
    shown,
)

CONTROL = [
    chr(code) for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) == "Cc"
]


class _Named(BaseModel):
    name: str = Field(pattern=PLAIN_TEXT_PATTERN)


def test_every_control_character_and_only_those_is_found() -> None:
    assert len(CONTROL) == 65  # C0 (32), DEL and C1 (32)
    assert all(first_control_character(f"web{c}01") == c for c in CONTROL)
    others = (chr(code) for code in range(0x2FF) if chr(code) not in CONTROL)
    assert all(first_control_character(f"web{c}01") is None for c in others)
    # Format characters and other look-alikes are not control characters.
    assert first_control_character("web\u200b\u202e\u00a0\ufeff01") is None


def test_the_contract_pattern_refuses_each_control_character_in_python_and_in_pydantic() -> None:
    for character in CONTROL:
        assert re.fullmatch(PLAIN_TEXT_PATTERN, f"web{character}01") is None, repr(character)
        with pytest.raises(ValidationError):
            _Named(name=f"web{character}01")
    for name in ("web-01.example.internal", "Büro Köln", "サーバー", " a "):
        assert re.fullmatch(PLAIN_TEXT_PATTERN, name), name
        assert _Named(name=name).name == name


@pytest.mark.parametrize("blank", ["", " ", "   "])
def test_the_contract_pattern_wants_something_besides_spaces(blank: str) -> None:
    assert re.fullmatch(PLAIN_TEXT_PATTERN, blank) is None
    with pytest.raises(ValidationError):
        _Named(name=blank)


def test_shown_replaces_each_control_character_and_keeps_the_rest() -> None:
    assert shown("a\x1b[2Jb\x9bc\x00d\u00e9") == "a\ufffd[2Jb\ufffdc\ufffdd\u00e9"


def test_shown_replaces_each_bidirectional_control_too() -> None:
    assert shown("Mallory\u202e gpj.exe \u2067x\u2069 \u200f") == (
        "Mallory\ufffd gpj.exe \ufffdx\ufffd \u200f"  # a mark (U+200F) is no control
    )


def test_clipped_keeps_text_within_the_limit_and_cuts_a_longer_one_with_an_ellipsis() -> None:
    assert clipped("", 3) == ""
    assert clipped("abc", 3) == "abc"
    assert clipped("abcd", 3) == "ab…"
    assert len(clipped("x" * 2000, 500)) == 500


BIDI = [
    *(chr(code) for code in range(0x202A, 0x202F)),
    *(chr(code) for code in range(0x2066, 0x206A)),
]


def test_every_bidirectional_control_and_only_those_is_found() -> None:
    assert all(first_bidi_control(f"Mallory{c}01") == c for c in BIDI)
    # Marks that set no direction for what follows, and look-alikes, are not refused.
    assert (
        first_bidi_control("web\u200e\u200f\u061c\u200b\u00a0\ufeff01 \u05e9\u05dc\u05d5\u05dd")
        is None
    )


def test_inert_writes_each_bidirectional_control_as_its_visible_escape() -> None:
    assert inert("Mallory\u202e said \u2066no\u2069") == "Mallory\\u202e said \\u2066no\\u2069"
    assert inert("plain \u05e9\u05dc\u05d5\u05dd") == "plain \u05e9\u05dc\u05d5\u05dd"
    assert all(first_bidi_control(inert(f"a{c}b")) is None for c in BIDI)


def test_inert_within_a_limit_never_cuts_an_escape_in_two() -> None:
    assert inert("ab\u202ecd", 10) == "ab\\u202ecd"
    assert inert("ab\u202ecd", 9) == "ab\\u202e…"
    assert inert("ab\u202ecd", 8) == "ab…"
    assert len(inert("\u202e" * 500, 500)) <= 500


def test_inert_writes_each_control_character_as_its_visible_escape_but_newline_and_tab() -> None:
    sent = "a\x1b[2J\x00b\x7f\x9bc\x85\rd\ne\tf"
    assert inert(sent) == "a\\u001b[2J\\u0000b\\u007f\\u009bc\\u0085\\u000dd\ne\tf"
    assert all(first_control_character(inert(f"a{c}b")) is None for c in CONTROL if c not in "\n\t")


def test_inert_writes_a_lone_surrogate_as_its_escape_and_keeps_a_pair() -> None:
    assert inert("a\ud800b\udcffc") == "a\\ud800b\\udcffc"
    assert inert("a\U0001f600b") == "a\U0001f600b"
    inert("x\ud800").encode("utf-8")


def test_inert_within_a_limit_never_cuts_a_control_escape_in_two() -> None:
    assert inert("ab\x00cd", 9) == "ab\\u0000…"
    assert inert("ab\x00cd", 8) == "ab…"
    assert all(len(inert("\x1b" * 600, limit)) <= limit for limit in range(1, 40))


def test_an_agents_error_with_a_lone_surrogate_can_be_built_and_sent() -> None:
    # `os.fsdecode` of a file name that is not UTF-8: the agent's report must still be built.
    from ground.contract.messages import OutcomeReport

    report = OutcomeReport(status="failed", error="cannot rename /opt/app/\udcff.tmp")
    assert report.error == "cannot rename /opt/app/\\udcff.tmp"
    report.model_dump_json().encode("utf-8")
