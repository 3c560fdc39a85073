"""What every `nachtwacht control` admin command shares: the parser that exits 2 on bad flags,
the database flags, `--json`, the admin pool, id parsing, the API's form of a result and printing,
the actor the trail names for a command-line action, and the words of a refusal: the services
name the API's fields, a command's refusal names the flag the operator typed (`in_flags`)."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO
from uuid import UUID

import psycopg
from pydantic import TypeAdapter

from control_plane import schema_version
from control_plane.accounts.services import AccountService
from control_plane.config import DATA_DIR_ENV, SETTINGS_ENV, DatabaseLocation
from control_plane.database import EmbeddedPostgres, first_line, open_pool
from control_plane.database_fence import fence_for
from control_plane.errors import (
    ConfigurationError,
    ControlPlaneError,
    DatabaseUnavailable,
    NotFound,
    RequestRefused,
    quoted,
)
from control_plane.events.trail import Actor
from control_plane.startup import opened_database
from control_plane.types import Pool
from ground.contract.plain_text import inert
from ground.whole_numbers import integer

__all__ = [
    "STANDBY_REFUSAL",
    "ExclusiveFlags",
    "Parser",
    "add_admin_flags",
    "add_database_flags",
    "add_json_flag",
    "admin_accounts",
    "admin_pool",
    "api_document",
    "cli_actor",
    "command_parser",
    "emit",
    "in_flags",
    "location",
    "optional_id",
    "parse_id",
    "shown_once",
]

# What a writing command says when the URL names a standby: the failover went the other way, or the
# two URLs were mixed up. Reading commands work on a standby and never see it.
STANDBY_REFUSAL = (
    "the database is a read-only standby (in recovery), and this command writes: give the "
    "primary's URL, or every host's with target_session_attrs=read-write (--database-url or "
    "NACHTWACHT_DATABASE_URL)"
)


def cli_actor() -> Actor:
    """An operator at this machine's command line: the trail names the login."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container, say)
        user = "unknown"
    return Actor(kind="operator", name=f"cli:{user}")


class Parser(argparse.ArgumentParser):
    """A command's parser: a bad flag is one line and exit 2. It keeps the arguments it takes
    (`arguments`: what `add_argument` returned, `ExclusiveFlags` included), and a parse names
    the (sub)command it ended in (`command_parser`), so a refusal can name the flag as typed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before the base class, which adds `--help` through `add_argument`.
        self.arguments: list[argparse.Action] = []
        super().__init__(*args, **kwargs)
        # A subcommand's defaults are set after its parent's: the deepest parser's stays.
        self.set_defaults(command_parser=self)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.arguments.append(action)
        return action

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


class ExclusiveFlags:
    """Flags of which a command takes at most one (argparse's mutually exclusive group), kept
    among the command's `arguments` like the rest."""

    def __init__(self, command: Parser, *, required: bool) -> None:
        self._command = command
        self._group = command.add_mutually_exclusive_group(required=required)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = self._group.add_argument(*args, **kwargs)
        self._command.arguments.append(action)
        return action


def add_database_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        help="an external PostgreSQL 15+ (default: $NACHTWACHT_DATABASE_URL, else embedded)",
    )
    parser.add_argument(
        "--data-dir",
        help="the embedded PostgreSQL's home (default: $NACHTWACHT_DATA_DIR, else user data dir)",
    )


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def add_admin_flags(parser: argparse.ArgumentParser) -> None:
    """What every admin command takes: where the database is, and `--json`."""
    add_database_flags(parser)
    add_json_flag(parser)


def location(args: argparse.Namespace) -> DatabaseLocation:
    return DatabaseLocation.resolve(url=args.database_url, data_dir=args.data_dir)


# A command whose database went away after it connected: what it had not committed was not made
# (a transaction happened or it did not), and running it again finishes it.
LOST_PARTWAY = (
    "the database went away partway (a change not yet committed was not made; run the command "
    "again once the database answers)"
)


@contextlib.contextmanager
def admin_pool(args: argparse.Namespace, *, finishing_restore: bool = False) -> Iterator[Pool]:
    """A one-connection pool for a command; `finishing_restore` for `after-restore` alone, which
    must use a restored server the replicas do not use yet."""
    where = location(args)
    if finishing_restore and where.data_dir is not None:
        _require_a_restored_server(args, where.data_dir)
    # The embedded database is this machine's own: bring it up to date. An external one is
    # migrated deliberately, with `nachtwacht control migrate`.
    with opened_database(where, migrate_to_head=where.url is None) as url:
        if finishing_restore:
            fence_for(url).allow_unfinished_restore()
        schema_version.require_head(url)
        _refuse_a_fenced_server(url)
        # The pool's own warnings (a connection it discards) are no line of the command's:
        # a database that goes away is said once, below.
        logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
        pool = open_pool(url, min_size=1, max_size=1)
        try:
            yield pool
        except psycopg.errors.ReadOnlySqlTransaction as exc:
            raise ConfigurationError(STANDBY_REFUSAL) from exc
        except psycopg.OperationalError as exc:  # its connection ended, or none to be had
            raise DatabaseUnavailable(f"{LOST_PARTWAY}: {first_line(exc)}") from exc
        finally:
            pool.close()


def _require_a_restored_server(args: argparse.Namespace, data_dir: Path) -> None:
    """Finishing a restore needs the data directory it was restored into: in one that holds no
    server (a typo), starting the embedded one would make a new, empty database, and the command
    would say to start the replicas of a database nobody restored."""
    if EmbeddedPostgres(data_dir).holds_a_server():
        return
    given = "--data-dir" if args.data_dir is not None else DATA_DIR_ENV
    if args.data_dir is None and not os.environ.get(DATA_DIR_ENV):
        given = "the default data directory"
    raise ConfigurationError(
        f"{given}: {quoted(str(data_dir))} holds no database (expected the data directory the "
        "backup was restored into); nothing was made or changed"
    )


def _refuse_a_fenced_server(url: str) -> None:
    """A fenced server stays fenced until an operator acts: a command says why at once, where
    its pool would retry for seconds, warning at each attempt."""
    try:
        fence_for(url).connect(autocommit=True).close()
    except psycopg.OperationalError as exc:  # a `FencedServer` among them
        raise DatabaseUnavailable(f"cannot connect to the database: {first_line(exc)}") from exc


@contextlib.contextmanager
def admin_accounts(args: argparse.Namespace) -> Iterator[AccountService]:
    """The accounts service over the admin pool: what the credential commands act through."""
    with admin_pool(args) as pool:
        yield AccountService(pool)


def shown_once(what: str, secret: str) -> str:
    """The line that prints a new secret: only its hash is stored, so this is the one chance."""
    return f"{what} (shown once, store it now): {secret}"


def integer_argument(text: str) -> int:
    """An option's whole number, in ASCII digits with an optional `-` (the command's own check
    then says what range it takes, so a number longer than any is still taken to be worded
    there): `int` would also take `٣`, `1_0` and spaces."""
    number = integer(text, max_digits=100)
    if number is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return number


def parse_id(field_name: str, value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError as exc:
        raise ControlPlaneError(f"{field_name}: {value!r} is not an id (expected a UUID)") from exc


def api_document(view: object) -> dict[str, Any]:
    """A service's result as the API answers it (the same names and formats), for `--json`."""
    document: dict[str, Any] = TypeAdapter(type(view)).dump_python(view, mode="json")
    return document


def optional_id(field_name: str, value: str | None) -> UUID | None:
    """An optional flag's id: `None` when the flag was not given."""
    return None if value is None else parse_id(field_name, value)


def printed(text: str, *, file: TextIO | None = None) -> None:
    """Print `text` to the terminal inert: whatever a stored row holds (a name, a reason, an
    agent's error from before text was made inert where it is stored), each control character
    but newline and tab, and each bidirectional control, is printed as its escape (`\\u001b`),
    read, not obeyed. Every line a command prints goes through here."""
    print(inert(text), file=file)


def emit(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    """A command's result: `--json` prints the API's answer as one JSON object (every character
    outside ASCII as its escape), otherwise its lines (`printed`)."""
    if args.json:
        printed(json.dumps(payload))
    else:
        printed("\n".join(lines))


# A service refuses an id nobody has by the kind of object (its code); the command's words for it,
# and the destinations of the flags that can carry such an id, the first one given counting.
_NOT_FOUND: dict[str, tuple[tuple[str, ...], str]] = {
    "org_not_found": (("org",), "is not the id of an organisation"),
    "agent_not_found": (("agent", "id"), "is not the id of an agent (or it was deleted)"),
    "release_not_found": (("release_id", "release"), "is not the id of a release"),
    "credential_not_found": (("id",), "is not the id of a credential"),
    "enrollment_token_not_found": (("id",), "is not the id of an enrollment token"),
    "pin_not_found": (("agent", "org"), "has no pin (expected a pinned organisation or agent)"),
}
# The API's field where the command's flag has another name.
_FIELD_DESTINATION = {"body": "file"}


def in_flags(args: argparse.Namespace, argv: Sequence[str], exc: Exception) -> str:
    """The refusal's one line in the command line's words: where a service names an API field
    (`wave`, `version`, `release_id`, …) or refuses an id, the line names the flag the operator
    typed (`--wave`, `RELEASE_ID`, …) with the value; every other refusal as the service said it.
    The one place every command's refusals pass through, so a service's wording is never
    repeated per command."""
    message = exc.message if isinstance(exc, RequestRefused) else str(exc)
    command = command_parser(args)
    if isinstance(exc, RequestRefused) and "field" in exc.fields:
        field = str(exc.fields["field"])
        destination = _FIELD_DESTINATION.get(field, field)
        flag = _flag(command, args, argv, destination)
        if flag is None:
            # A refusal asking for a field that was not given ("… (to)") names the option to give.
            option = _option(command, destination)
            if option is not None and message.endswith(f"({field})"):
                return message.removesuffix(f"({field})") + f"({option})"
            return message
        if message.startswith(f"{field}:"):
            return flag + message[len(field) :]
        return f"{flag}: {message}"
    if isinstance(exc, NotFound) and exc.code in _NOT_FOUND:
        destinations, expected = _NOT_FOUND[str(exc.code)]
        for destination in destinations:
            flag = _flag(command, args, argv, destination)
            if flag is not None:
                return f"{flag}: {quoted(getattr(args, destination))} {expected}"
    return message


def command_parser(args: argparse.Namespace) -> Parser:
    """The (sub)command's own parser: `promote`'s, `enrollment-token create`'s, …"""
    parser: Parser = args.command_parser
    return parser


def _option(command: Parser, destination: str) -> str | None:
    """The command's option that stores `destination` (its first spelling), else None."""
    for action in command.arguments:
        if action.dest == destination and action.option_strings:
            return str(action.option_strings[0])
    return None


def _flag(
    command: Parser,
    args: argparse.Namespace,
    argv: Sequence[str],
    destination: str,
) -> str | None:
    """How the operator gave the value stored at `destination`: the option as typed (of its
    aliases, the one on the command line), a positional argument's name, or the environment
    variable `serve` read it from; None when the command has no such flag or it was not given."""
    for action in command.arguments:
        if action.dest != destination:
            continue
        if not action.option_strings:
            return str(action.metavar or destination.upper())
        if getattr(args, destination, None) is None:
            return SETTINGS_ENV.get(destination)  # `serve` took it from its variable, if at all
        typed = [
            option
            for option in action.option_strings
            if any(word == option or word.startswith(f"{option}=") for word in argv)
        ]
        return (typed or action.option_strings)[0]
    return None
