"""A replica that may open more database sessions than its database allows says so at start-up
(and still serves): its pools grow on demand, so without the warning it meets the limit only on
a busy night, as 503s."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import httpx
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from control_plane.connection_budget import (
    OWN_CONNECTIONS_PER_WORKER,
    SessionBudget,
    budget_warning,
    read_budget,
)
from nachtwacht.demo_world.control_planes import RunningControlPlane

WARNING = "this replica may open"


def _setting(database_url: str, name: str) -> int:
    with psycopg.connect(database_url) as conn:
        row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    assert row is not None
    return int(row[0])


def test_a_replica_that_may_open_more_than_the_server_allows_says_so_and_serves(
    control_plane_server: Callable[..., RunningControlPlane], database_url: str
) -> None:
    most = _setting(database_url, "max_connections")
    server = control_plane_server(args=["--workers", "1", "--pool-size", str(most)])
    assert httpx.get(f"{server.base_url}/healthz", timeout=10).status_code == 200
    said = [line for line in server.stderr_path.read_text().splitlines() if WARNING in line]
    with psycopg.connect(database_url, row_factory=dict_row) as conn:
        budget = read_budget(conn)
    needed = most + OWN_CONNECTIONS_PER_WORKER
    assert said == [
        f"nachtwacht control serve: this replica may open {needed} database sessions "
        f"(--workers 1 * (--pool-size {most} + {OWN_CONNECTIONS_PER_WORKER} of each worker's "
        f"own)), more than the {budget.allowed} the database lets role {budget.role!r} open "
        f"({budget.why}); on a busy night requests will wait for a connection and answer 503 "
        "database_unavailable: lower --workers or --pool-size, or raise the limit"
    ], said


def test_a_replica_within_the_budget_says_nothing(
    control_plane_server: Callable[..., RunningControlPlane],
) -> None:
    server = control_plane_server(args=["--workers", "1", "--pool-size", "1"])
    assert httpx.get(f"{server.base_url}/healthz", timeout=10).status_code == 200
    assert WARNING not in server.stderr_path.read_text()


@pytest.fixture
def limited_role_url(database_url: str) -> Iterator[str]:
    """The test database as a role that is no superuser, with a CONNECTION LIMIT of 7."""
    role = f"nw_budget_{uuid.uuid4().hex[:12]}"
    params = conninfo_to_dict(database_url)
    with psycopg.connect(database_url, autocommit=True) as admin:
        try:
            admin.execute(
                sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER CONNECTION LIMIT 7").format(
                    sql.Identifier(role)
                )
            )
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("the test database's role may not create roles (CREATEROLE)")
        admin.execute(
            sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
                sql.Identifier(str(params["dbname"])), sql.Identifier(role)
            )
        )
    try:
        yield make_conninfo(database_url, user=role, password=None)
    finally:
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute(
                sql.SQL("ALTER DATABASE {} CONNECTION LIMIT -1").format(
                    sql.Identifier(str(params["dbname"]))
                )
            )
            admin.execute(
                sql.SQL("REVOKE CONNECT ON DATABASE {} FROM {}").format(
                    sql.Identifier(str(params["dbname"])), sql.Identifier(role)
                )
            )
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_role_is_held_to_its_own_limit_and_the_databases(
    limited_role_url: str, database_url: str
) -> None:
    with psycopg.connect(limited_role_url, row_factory=dict_row) as conn:
        budget = read_budget(conn)
    assert (budget.allowed, budget.why) == (7, "the role's CONNECTION LIMIT 7")
    dbname = str(conninfo_to_dict(database_url)["dbname"])
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} CONNECTION LIMIT 5").format(sql.Identifier(dbname))
        )
    with psycopg.connect(limited_role_url, row_factory=dict_row) as conn:
        budget = read_budget(conn)
    assert (budget.allowed, budget.why) == (5, "the database's CONNECTION LIMIT 5")
    warning = budget_warning(budget, workers=1, pool_size=2)
    assert warning is not None
    assert "may open 6 database sessions" in warning
    assert "more than the 5 the database lets role 'nw_budget_" in warning


def test_a_role_without_limits_gets_max_connections_less_the_reserved(
    limited_role_url: str, database_url: str
) -> None:
    role = str(conninfo_to_dict(limited_role_url)["user"])
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(sql.SQL("ALTER ROLE {} CONNECTION LIMIT -1").format(sql.Identifier(role)))
    most = _setting(database_url, "max_connections")
    reserved = _setting(database_url, "superuser_reserved_connections") + _setting(
        database_url, "reserved_connections"
    )
    with psycopg.connect(limited_role_url, row_factory=dict_row) as conn:
        budget = read_budget(conn)
    assert budget.allowed == most - reserved
    assert budget.why == f"max_connections {most}, {reserved} of them reserved"


@pytest.mark.parametrize(
    ("workers", "pool_size", "others", "said"),
    [
        pytest.param(4, 10, 0, None, id="fits_alone"),
        pytest.param(4, 10, 40, None, id="fits_with_the_others"),
        pytest.param(8, 10, 0, "more than the 97", id="over_alone"),
        pytest.param(4, 10, 50, "and 50 other sessions are open now", id="over_with_the_others"),
    ],
)
def test_the_warning_counts_each_workers_own_sessions_and_the_others(
    workers: int, pool_size: int, others: int, said: str | None
) -> None:
    budget = SessionBudget(role="nachtwacht", allowed=97, why="max_connections 100", others=others)
    warning = budget_warning(budget, workers=workers, pool_size=pool_size)
    if said is None:
        assert warning is None
    else:
        assert warning is not None and said in warning
        assert f"may open {workers * (pool_size + 4)} database sessions" in warning
