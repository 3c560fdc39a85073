"""Every run status, miss reason, skip reason and event kind the product writes has its words in
all nine languages: the sets are collected from the migrations' CHECK constraints and from the
code that writes events, so a kind added later without words fails here rather than showing
"Other event (kind)" or "reason unknown" on a customer's timeline."""

from __future__ import annotations

import importlib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import get_args
from uuid import uuid4

import pytest

from control_plane.events.services import Actor, EventView
from control_plane.panel.event_wording import event_line
from control_plane.panel.i18n import LANGUAGES, Language
from control_plane.panel.wording import status_text
from control_plane.runs.views import RunView
from ground.contract.messages import OutcomeStatus

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "control_plane"
MIGRATIONS = PRODUCT / "migrations" / "versions"
AT = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)

KIND = r"[a-z_]+\.[a-z_]+"
# `kind="a.b"`, `kind="a.b" if … else "a.c"`, `_issued(…, "a.b")`, `…_EVENT = "a.b"`, and the
# reconcile's SQL that writes events itself (`'update.missed', 'schedule'`).
WRITTEN = [
    re.compile(rf'\bkind="({KIND})"(?:\s+if\s[^\n]*?\selse\s"({KIND})")?'),
    re.compile(rf'\b_issued\([^)]*"({KIND})"\)'),
    re.compile(rf'_EVENT = "({KIND})"'),
    re.compile(rf"'({KIND})', '(?:schedule|agent|operator|control_plane)'"),
]
BUILT_AT_RUN_TIME = re.compile(r'\bkind=f"([^"]*)"')


def _product_sources() -> list[Path]:
    return [
        path
        for path in sorted(PRODUCT.rglob("*.py"))
        if "panel" not in path.parts and "migrations" not in path.parts
    ]


def _event_kinds() -> set[str]:
    kinds: set[str] = set()
    for path in _product_sources():
        text = path.read_text(encoding="utf-8")
        for pattern in WRITTEN:
            for match in pattern.finditer(text):
                kinds.update(group for group in match.groups() if group)
        for built in BUILT_AT_RUN_TIME.findall(text):
            # The outcome's event is `update.<stored status>`: a reported status, or
            # `unauthorised` when the switch had no permission. Any other kind built at run
            # time must be added here with the values it can take.
            assert built == "update.{stored}", f"{path}: an event kind built at run time: {built}"
            kinds.update(
                f"update.{status}" for status in (*get_args(OutcomeStatus), "unauthorised")
            )
    return kinds


def _checked_values(constraint: str) -> set[str]:
    """The values the newest migration that defines `constraint` allows."""
    found: set[str] | None = None
    pattern = re.compile(rf"{constraint}\s+CHECK \(\w+ IN \((.*?)\)\)", re.DOTALL)
    for path in sorted(MIGRATIONS.glob("rev*.py")):
        module = importlib.import_module(f"control_plane.migrations.versions.{path.stem}")
        # A migration that writes no `UPGRADE` (its SQL under other names) changes no run CHECK;
        # the migrated schema's lists are compared with the contract in test_migrations_frozen.
        for match in pattern.finditer(getattr(module, "UPGRADE", "")):
            found = set(re.findall(r"'([a-z_]+)'", match.group(1)))
    assert found, f"no migration defines {constraint}"
    return found


EVENT_KINDS = sorted(_event_kinds())
STATUSES = sorted(_checked_values("runs_status_check"))
MISS_REASONS = sorted(_checked_values("runs_miss_reason_known"))
SKIP_REASONS = sorted(_checked_values("runs_skip_reason_known"))


def test_the_collectors_find_what_the_product_writes() -> None:
    """A collector that finds nothing would let everything pass."""
    assert {"update.skipped", "update.missed", "update.unauthorised", "notice.read"} <= set(
        EVENT_KINDS
    )
    assert {"canary.unmarked", "brake.released", "credential.revoked", "webhook.tested"} <= set(
        EVENT_KINDS
    )
    assert {"skipped", "unauthorised", "missed", "requested"} <= set(STATUSES)
    assert {"offline", "platform_unavailable"} <= set(MISS_REASONS)
    assert set(SKIP_REASONS) == {"held", "release_rolled_back", "release_halted"}


def _run(status: str, *, miss: str | None = None, skip: str | None = None) -> RunView:
    return RunView(
        run_id=uuid4(),
        agent_id=uuid4(),
        trigger="schedule",
        slot_key="2026-11-30T03:00",
        slot_at=AT,
        status=status,
        from_version="1.5.0",
        release_version="1.6.0",
        version="1.6.0",
        error=None,
        miss_reason=miss,
        skip_reason=skip,
        created_at=AT,
        claimed_at=None,
        finished_at=None,
    )


@pytest.mark.parametrize("code", LANGUAGES)
@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_every_event_kind_has_its_words(code: str, kind: str) -> None:
    lang = Language(code)
    for actor in ("schedule", "user", "operator", "control_plane"):
        event = EventView(id=1, kind=kind, actor=Actor(kind=actor), run_id=None, at=AT, data={})  # type: ignore[arg-type]
        assert event_line(lang, event) != lang.gettext("Other event (%(kind)s).", kind=kind)


@pytest.mark.parametrize("code", LANGUAGES)
@pytest.mark.parametrize("status", STATUSES)
def test_every_run_status_has_its_words(code: str, status: str) -> None:
    lang = Language(code)
    run = _run(
        status,
        miss="offline" if status == "missed" else None,
        skip="held" if status == "skipped" else None,
    )
    assert status_text(lang, run) != lang.gettext("unknown state")


@pytest.mark.parametrize("code", LANGUAGES)
@pytest.mark.parametrize("reason", MISS_REASONS)
def test_every_miss_reason_has_its_words(code: str, reason: str) -> None:
    lang = Language(code)
    worded = status_text(lang, _run("missed", miss=reason))
    if reason != "unknown":  # the one reason whose words say it is not known
        assert lang.gettext("reason unknown") not in worded


@pytest.mark.parametrize("code", LANGUAGES)
@pytest.mark.parametrize("reason", SKIP_REASONS)
def test_every_skip_reason_has_its_words(code: str, reason: str) -> None:
    lang = Language(code)
    assert lang.gettext("reason unknown") not in status_text(lang, _run("skipped", skip=reason))
    event = EventView(
        id=1, kind="update.skipped", actor=Actor(kind="schedule"), run_id=None, at=AT,
        data={"reason": reason},
    )  # fmt: skip
    assert lang.gettext("reason unknown") not in event_line(lang, event)
