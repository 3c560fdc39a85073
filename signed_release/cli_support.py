"""What the `nachtwacht release` commands share: the usage error (one line, exit status 2), the
parser that raises it, durations, versions and the hook for subcommands of a package above."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import NoReturn, Protocol, TypeVar

from ground.whole_numbers import whole_number
from signed_release.versions import is_valid_version

__all__ = [
    "CommandParser",
    "ExtraCommand",
    "Subcommands",
    "UsageError",
    "parse_duration",
    "positive_int",
    "version_argument",
]

_DURATION = re.compile(r"([1-9]\d{0,5})([smhd])", re.ASCII)
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class UsageError(Exception):
    """Bad command-line input; printed as one line after the command it was given to
    (`nachtwacht release sign: --out: …`), exit status 2. `command`: the (sub)command the
    parser refused the line for, when that is known better than by the caller."""

    def __init__(self, message: str, *, command: str | None = None) -> None:
        super().__init__(message)
        self.command = command


class CommandParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message, command=self.prog)


_Made = TypeVar("_Made", bound=argparse.ArgumentParser, covariant=True)


class Subcommands(Protocol[_Made]):
    """What `add_subparsers(parser_class=…)` returned, as commands use it: it makes parsers of
    that class (`Subcommands[CommandParser]` here; the agent's command line has its own)."""

    def add_parser(self, name: str, *, help: str, description: str = ...) -> _Made: ...


@dataclass(frozen=True, kw_only=True)
class ExtraCommand:
    """A subcommand that a package above this one adds to `nachtwacht release`."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def parse_duration(value: str, flag: str = "--expires-in") -> timedelta:
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        raise UsageError(
            f"{flag}: {value!r} is not a duration (expected a whole number from 1 to 999999 "
            "and a unit s, m, h or d, e.g. 30d)"
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def version_argument(value: str) -> str:
    if not is_valid_version(value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a version (expected MAJOR.MINOR.PATCH, e.g. 1.5.0)"
        )
    return value


def positive_int(value: str) -> int:
    number = whole_number(value)
    if number is None or number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a positive integer")
    return number
