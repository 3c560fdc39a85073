"""How `nachtwacht control` finds the flag a refusal names, without a database: every command's
parser keeps every argument it takes (those of a one-of group too), a parse names the deepest
(sub)command, and a service's field or unknown id becomes the flag as it was typed."""

from __future__ import annotations

import argparse
from collections.abc import Iterator

import pytest

from control_plane.cli import _parser
from control_plane.cli_common import Parser, command_parser, in_flags
from control_plane.errors import InvalidInput, NotFound

UNKNOWN = "7b0c4f52-0000-4000-8000-000000000000"


def _commands(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, Parser]]:
    """Every (sub)command's name and parser (argparse's own list of them: a test may read it)."""
    assert isinstance(parser, Parser), name
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _commands(sub, f"{name} {sub_name}")


def test_every_command_keeps_every_argument_it_takes() -> None:
    """An argument argparse holds that the parser did not keep is a flag no refusal can name
    (a one-of group made with `add_mutually_exclusive_group` instead of `ExclusiveFlags`)."""
    lost = {
        name: [
            action.dest
            for action in command._actions
            if action not in command.arguments
            and not isinstance(action, argparse._SubParsersAction)
        ]
        for name, command in _commands(_parser(), "nachtwacht control")
    }
    assert {name: dests for name, dests in lost.items() if dests} == {}


@pytest.mark.parametrize(
    ("argv", "prog"),
    [
        pytest.param(["halt", UNKNOWN, "--reason", "x"], "nachtwacht control halt", id="command"),
        pytest.param(
            ["enrollment-token", "revoke", "x"],
            "nachtwacht control enrollment-token revoke",
            id="subcommand",
        ),
    ],
)
def test_a_parse_names_the_deepest_command(argv: list[str], prog: str) -> None:
    assert command_parser(_parser().parse_args(argv)).prog == prog


@pytest.mark.parametrize(
    ("argv", "refusal", "line"),
    [
        pytest.param(
            ["pin", "--agent", UNKNOWN, "--version", "9"],
            InvalidInput("version", "9", "is not a version"),
            "--version: '9' is not a version",
            id="field_of_a_one_of_flag",
        ),
        pytest.param(
            ["pin", "--agent", UNKNOWN, "--running"],
            NotFound("no such agent", code="agent_not_found"),
            f"--agent: '{UNKNOWN}' is not the id of an agent (or it was deleted)",
            id="unknown_id_of_a_one_of_flag",
        ),
        pytest.param(
            ["create-panel-key", "--org", UNKNOWN, "--label", "=x"],
            InvalidInput("name", "=x", "is not a name"),
            "--label: '=x' is not a name",
            id="alias_as_typed",
        ),
        pytest.param(
            ["enrollment-token", "revoke", "nope"],
            NotFound("no such token", code="enrollment_token_not_found"),
            "ID: 'nope' is not the id of an enrollment token",
            id="positional_of_a_subcommand",
        ),
        pytest.param(
            ["rollback", "--channel", "c", "--platform", "p", "--reason", "r"],
            InvalidInput("to", None, "", message="no older release: name the version (to)"),
            "no older release: name the version (--to)",
            id="option_not_given",
        ),
    ],
)
def test_a_refusal_names_the_flag_as_typed(argv: list[str], refusal: Exception, line: str) -> None:
    assert in_flags(_parser().parse_args(argv), argv, refusal) == line
