"""A stand-in for a database connection, for running a decision on remembered facts.

The claim's decision (`claims.services.ClaimService._decide`) takes the hot statement's row and
a connection: it refuses from the row alone, and uses the connection only to answer something
else (the same claim again, a grant). Run on a remembered row with `FACTS_ONLY` instead, it
either raises its refusal — in the order it always checks, with every check someone adds to
it — or raises `DatabaseNeeded` the moment it would touch the database, and the caller asks the
database afresh. So the memory can only ever refuse, never grant.
"""

from __future__ import annotations

from typing import NoReturn, cast

from control_plane.types import Connection

__all__ = ["FACTS_ONLY", "DatabaseNeeded"]


class DatabaseNeeded(Exception):
    """The remembered facts do not decide this: ask the database."""


class _FactsOnly:
    def __getattr__(self, name: str) -> NoReturn:
        raise DatabaseNeeded(name)


FACTS_ONLY: Connection = cast(Connection, _FactsOnly())
