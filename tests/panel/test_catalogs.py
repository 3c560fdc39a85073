"""The nine catalogs: every message translated, placeholders kept, nothing empty, nothing stale;
and a page rendered in each language holds no English sentence from the code."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

import ground.contract.wording
from control_plane.panel.i18n import LANGUAGES, LOCALES_DIR, Language
from tests.panel.conftest import PanelWorld, csrf_of, sign_in_client

PLACEHOLDER = re.compile(r"%\([a-z_]+\)s")
PANEL_DIR = LOCALES_DIR.parent
# The reasons' words, shared with `agent status`: the panel translates them as its own messages.
SHARED_WORDING = Path(ground.contract.wording.__file__)


def _catalog(code: str):  # type: ignore[no-untyped-def]
    with (LOCALES_DIR / code / "LC_MESSAGES" / "messages.po").open("rb") as po:
        return read_po(po, locale=code)


def _extracted(tmp_path: Path) -> set[object]:
    """The messages the code and templates use today, extracted as the build does."""
    pot = tmp_path / "messages.pot"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "babel.messages.frontend",
            "extract",
            "-F",
            str(PANEL_DIR / "babel.cfg"),
            "-k",
            "gettext",
            "-k",
            "ngettext:1,2",
            "--no-location",
            "-o",
            str(pot),
            str(PANEL_DIR),
            str(SHARED_WORDING),
        ],
        check=True,
        capture_output=True,
    )
    with pot.open("rb") as handle:
        return {message.id for message in read_po(handle) if message.id}


@pytest.mark.parametrize("code", LANGUAGES)
def test_every_message_is_translated_with_its_placeholders(code: str, tmp_path: Path) -> None:
    catalog = _catalog(code)
    used = _extracted(tmp_path)
    ids = {message.id for message in catalog if message.id}
    assert used - ids == set(), f"{code}: messages the code uses but the catalog lacks"
    assert ids - used == set(), f"{code}: messages the catalog keeps but nothing uses"
    for message in catalog:
        if not message.id:
            continue
        assert not message.fuzzy, f"{code}: {message.id!r} is marked fuzzy"
        singular = message.id[0] if isinstance(message.id, tuple) else message.id
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        assert len(strings) == (catalog.num_plurals if isinstance(message.id, tuple) else 1)
        for text in strings:
            assert text and text.strip(), f"{code}: {message.id!r} has an empty translation"
            assert set(PLACEHOLDER.findall(text)) == set(PLACEHOLDER.findall(singular)), (
                f"{code}: {message.id!r} -> {text!r} changes the placeholders"
            )


@pytest.mark.parametrize("code", [code for code in LANGUAGES if code != "en"])
def test_long_sentences_are_not_left_in_english(code: str) -> None:
    """A sentence kept in English by mistake reads the same as the English catalog's."""
    english = {m.id: m.string for m in _catalog("en") if m.id}
    same = [
        message.id
        for message in _catalog(code)
        if message.id and len(str(message.id)) > 20 and message.string == english[message.id]
    ]
    assert same == []


def test_plural_forms_follow_each_language() -> None:
    polish = Language("pl")
    assert polish.ngettext("%(count)s failed.", "%(count)s failed.", 1, count="1") == "1 nieudana."
    assert polish.ngettext("%(count)s failed.", "%(count)s failed.", 3, count="3") == "3 nieudane."
    assert polish.ngettext("%(count)s failed.", "%(count)s failed.", 5, count="5") == (
        "5 nieudanych."
    )


def test_pages_in_each_language_hold_no_english_sentence(panel_world: PanelWorld) -> None:
    english = {m.id: m.string for m in _catalog("en") if m.id and not isinstance(m.id, tuple)}
    sentences = {text for text in english.values() if len(text) > 25 and "%(" not in text}
    with sign_in_client(panel_world, panel_world.panel_key) as client:
        token = csrf_of(client.get("/panel/agents").text)
        for code in LANGUAGES:
            if code == "en":
                continue
            client.get(f"/panel/language/{code}", params={"next": "/panel/agents"})
            pages = [
                client.get(path).text
                for path in (
                    "/panel/agents",
                    f"/panel/agents/{panel_world.agent_id}",
                    "/panel/notifications",
                    "/panel/webhook",
                    "/panel/forecast",
                    "/panel/enrollment",
                    "/panel/history/runs",
                    f"/panel/history/events?agent={panel_world.agent_id}",
                    "/panel/history/versions",
                )
            ]
            pages.append(
                client.post(
                    f"/panel/agents/{panel_world.agent_id}/schedule",
                    data={"enabled": "1", "times": ["02:30", "3:07", ""], "csrf": token},
                ).text
            )
            for html in pages:
                assert f'<html lang="{code}">' in html
                found = [sentence for sentence in sentences if sentence in html]
                assert found == [], f"{code}: English left on a page: {found}"
