"""docs/cli.md names every option of every `nachtwacht control` and `nachtwacht release` subcommand
in that subcommand's own row: it is the page operators and release managers read for them."""

from __future__ import annotations

import argparse
import re

from control_plane.cli import _parser
from nachtwacht.release_cli import BUILD_DEMO_AGENT
from signed_release.cli import _build_parser as release_parser
from tests.conftest import REPO_ROOT

# Options every command has, described once above the table.
SHARED = {"--help", "--json", "--database-url", "--data-dir"}


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= _subcommands(sub, f"{prefix}{name} ")
    options = {o for a in parser._actions for o in a.option_strings if o.startswith("--")}
    if prefix:
        found[prefix.strip()] = options - SHARED
    return found


def _rows(section: str) -> list[tuple[str, str]]:
    """(first cell, the row's other cells) of each table row in one `## …` section of cli.md."""
    text = (REPO_ROOT / "docs" / "cli.md").read_text()
    body = text.split(f"## `{section}`", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in body.splitlines():
        if line.startswith("| `"):
            first, rest = line[2:].split(" | ", 1)
            rows.append((first, rest))
    return rows


def _missing(section: str, commands: dict[str, set[str]]) -> dict[str, list[str]]:
    rows = _rows(section)
    missing = {}
    for command, options in commands.items():
        named = re.compile(rf"`{re.escape(command)}[` ]")
        cells = " ".join(rest for first, rest in rows if named.search(first))
        if not cells:
            missing[command] = ["(no row)"]
        elif absent := sorted(o for o in options if f"`{o}" not in cells):
            missing[command] = absent
    return missing


def test_the_reference_names_every_option_of_every_control_command() -> None:
    assert _missing("nachtwacht control", _subcommands(_parser())) == {}


def test_the_reference_names_every_option_of_every_release_command() -> None:
    commands = _subcommands(release_parser((BUILD_DEMO_AGENT,)))
    assert _missing("nachtwacht release", commands) == {}
