"""docs/cli.md names every option of every `nachtwacht control` subcommand: it is the page an
operator reads for them."""

from __future__ import annotations

import argparse

from control_plane.cli import _parser
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


def test_the_reference_names_every_option_of_every_control_command() -> None:
    reference = (REPO_ROOT / "docs" / "cli.md").read_text()
    missing = {
        command: sorted(o for o in options if f"`{o}" not in reference)
        for command, options in _subcommands(_parser()).items()
    }
    assert {command: options for command, options in missing.items() if options} == {}
