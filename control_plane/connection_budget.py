"""How many database sessions a serving replica may open, against what its database allows.

Each worker of `nachtwacht control serve` opens at most `--pool-size` connections for requests
and `OWN_CONNECTIONS_PER_WORKER` of its own (the reconcile passes' two, the change feed and the
reconcile lock): a replica's most is `workers * (pool_size + 4)`. Its pools open one connection
each and grow on demand, so a replica that may open more than the database lets it starts and
serves quiet hours well, then meets the limit on the first busy night: PostgreSQL refuses the
session, the request that waited for it answers 503 `database_unavailable`. So the budget is
said at start-up, where the operator reads it, not found at 03:00.

What the database lets the replica's role open: `max_connections` for the whole server, less the
slots reserved for superusers (and, from PostgreSQL 16, for `pg_use_reserved_connections`), and
no more than the role's and the database's own `CONNECTION LIMIT` — a superuser is held to
`max_connections` alone. Other replicas and tools share the same slots: their sessions open now
are counted too, in a second, softer warning (they come and go).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from control_plane.types import Connection

__all__ = [
    "OWN_CONNECTIONS_PER_WORKER",
    "SessionBudget",
    "budget_warning",
    "read_budget",
    "replica_connections",
    "say_the_budget",
]

logger = logging.getLogger(__name__)

# Per worker, besides its requests' pool: the reconcile pool (2), the change feed, the lock.
OWN_CONNECTIONS_PER_WORKER = 4

_BUDGET = """
SELECT current_setting('max_connections')::int AS max_connections,
       current_setting('superuser_reserved_connections')::int AS superuser_reserved,
       coalesce(current_setting('reserved_connections', true), '0')::int AS reserved,
       r.rolsuper AS superuser,
       r.rolconnlimit AS role_limit,
       d.datconnlimit AS database_limit,
       current_user AS role,
       (SELECT count(*) FROM pg_stat_activity
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()) AS others
  FROM pg_roles r, pg_database d
 WHERE r.rolname = current_user AND d.datname = current_database()
"""


@dataclass(frozen=True, kw_only=True)
class SessionBudget:
    role: str
    allowed: int  # sessions the role may have open at once
    why: str  # how `allowed` follows from the settings, in words
    others: int  # client sessions open now besides the one that asked


def replica_connections(workers: int, pool_size: int) -> int:
    """The most sessions one replica opens."""
    return workers * (pool_size + OWN_CONNECTIONS_PER_WORKER)


def read_budget(conn: Connection) -> SessionBudget:
    row = conn.execute(_BUDGET).fetchone()
    assert row is not None  # the role and the database of this very session
    most = int(row["max_connections"])
    if row["superuser"]:
        return SessionBudget(
            role=row["role"],
            allowed=most,
            why=f"max_connections {most}, the role being a superuser",
            others=int(row["others"]),
        )
    reserved = int(row["superuser_reserved"]) + int(row["reserved"])
    allowed = most - reserved
    why = f"max_connections {most}, {reserved} of them reserved"
    limits = (("the role's", row["role_limit"]), ("the database's", row["database_limit"]))
    for name, limit in limits:
        if limit is not None and 0 <= int(limit) < allowed:
            allowed = int(limit)
            why = f"{name} CONNECTION LIMIT {allowed}"
    return SessionBudget(role=row["role"], allowed=allowed, why=why, others=int(row["others"]))


def budget_warning(budget: SessionBudget, *, workers: int, pool_size: int) -> str | None:
    """The start-up warning when this replica may open more sessions than the database allows
    (alone, or with the sessions open now); None when it fits."""
    needed = replica_connections(workers, pool_size)
    what = (
        f"this replica may open {needed} database sessions (--workers {workers} * "
        f"(--pool-size {pool_size} + {OWN_CONNECTIONS_PER_WORKER} of each worker's own))"
    )
    allows = f"the {budget.allowed} the database lets role {budget.role!r} open ({budget.why})"
    then = (
        "on a busy night requests will wait for a connection and answer 503 "
        "database_unavailable: lower --workers or --pool-size, or raise the limit"
    )
    if needed > budget.allowed:
        return f"{what}, more than {allows}; {then}"
    if needed + budget.others > budget.allowed:
        return (
            f"{what}, and {budget.others} other sessions are open now (other replicas, tools): "
            f"together more than {allows}; {then}"
        )
    return None


def say_the_budget(conn: Connection, *, workers: int, pool_size: int) -> None:
    """Log the warning, if there is one."""
    warning = budget_warning(read_budget(conn), workers=workers, pool_size=pool_size)
    if warning is not None:
        logger.warning("nachtwacht control serve: %s", warning)
