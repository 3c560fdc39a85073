"""The product's command lines use argparse's public API only: no private name of the module
(`argparse._SubParsersAction`) and no private attribute or method of its parsers
(`parser._actions`), read from the source, annotations included. A private name may change in any
Python release; a parser keeps what its command needs to know about itself
(`control_plane.cli_common.Parser`)."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from tests.architecture.test_layers import REPO, _product_modules


def _private(names: object) -> set[str]:
    return {name for name in dir(names) if name.startswith("_") and not name.startswith("__")}


def _parser_internals() -> set[str]:
    """The private attributes and methods of a parser, its groups and its subcommands' action."""
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group()
    subcommands = parser.add_subparsers()
    found = set()
    for thing in (parser, group, subcommands, parser.add_argument("--flag")):
        found |= _private(thing) | {name for name in vars(thing) if name.startswith("_")}
    return found


PRIVATE_TO_ARGPARSE = _private(argparse)
PARSER_INTERNALS = _parser_internals()


def _reaching_in(path: Path) -> list[tuple[int, str]]:
    """(line, name) for each use of a private name of argparse in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
            node.attr in PARSER_INTERNALS
            or (
                isinstance(node.value, ast.Name)
                and node.value.id == "argparse"
                and node.attr in PRIVATE_TO_ARGPARSE
            )
        ):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.ImportFrom) and node.module == "argparse":
            found += [(node.lineno, a.name) for a in node.names if a.name in PRIVATE_TO_ARGPARSE]
    return sorted(found)


def test_no_product_module_reaches_into_argparse() -> None:
    uses = [
        f"{path.relative_to(REPO)}:{line} {name}"
        for path in _product_modules().values()
        for line, name in _reaching_in(path)
    ]
    assert uses == []


def test_a_private_name_of_argparse_is_found_in_an_annotation_and_an_import(
    tmp_path: Path,
) -> None:
    source = tmp_path / "reaching_in.py"
    source.write_text(
        "from argparse import _SubParsersAction\n"
        "def add(commands: argparse._SubParsersAction[Parser], parser: Parser) -> None:\n"
        "    return parser._actions\n"
    )
    assert _reaching_in(source) == [
        (1, "_SubParsersAction"),
        (2, "_SubParsersAction"),
        (3, "_actions"),
    ]
