"""What every `nachtwacht control` admin command shares: the parser that exits 2 on bad flags,
the database flags, `--json`, the admin pool, id parsing, the API's form of a result and printing,
and the actor the trail names for a command-line action."""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
from collections.abc import Iterator
from typing import Any, NoReturn
from uuid import UUID

import psycopg
from pydantic import TypeAdapter

from control_plane import schema_version
from control_plane.accounts.services import AccountService
from control_plane.config import DatabaseLocation
from control_plane.database import first_line, open_pool
from control_plane.database_fence import fence_for
from control_plane.errors import ControlPlaneError, DatabaseUnavailable
from control_plane.events.trail import Actor
from control_plane.startup import opened_database
from control_plane.types import Pool

__all__ = [
    "Parser",
    "add_admin_flags",
    "add_database_flags",
    "add_json_flag",
    "admin_accounts",
    "admin_pool",
    "api_document",
    "cli_actor",
    "emit",
    "location",
    "optional_id",
    "parse_id",
    "shown_once",
]


def cli_actor() -> Actor:
    """An operator at this machine's command line: the trail names the login."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container, say)
        user = "unknown"
    return Actor(kind="operator", name=f"cli:{user}")


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


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


@contextlib.contextmanager
def admin_pool(args: argparse.Namespace, *, finishing_restore: bool = False) -> Iterator[Pool]:
    """A one-connection pool for a command; `finishing_restore` for `after-restore` alone, which
    must use a restored server the replicas do not use yet."""
    where = location(args)
    # The embedded database is this machine's own: bring it up to date. An external one is
    # migrated deliberately, with `nachtwacht control migrate`.
    with opened_database(where, migrate_to_head=where.url is None) as url:
        if finishing_restore:
            fence_for(url).allow_unfinished_restore()
        schema_version.require_head(url)
        _refuse_a_fenced_server(url)
        pool = open_pool(url, min_size=1, max_size=1)
        try:
            yield pool
        finally:
            pool.close()


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


def emit(args: argparse.Namespace, payload: dict[str, Any], lines: list[str]) -> None:
    if args.json:
        print(json.dumps(payload))
    else:
        print("\n".join(lines))
