"""Migration 0018: the database holds a token to the service's bounds on its own (a row written by
anything but the service still cannot have 10,001 uses or live 31 days), and the migration's
literals are the service's constants."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from control_plane.enrollment.rules import MAX_EXPIRES_IN, MAX_USES
from control_plane.migrations.versions import rev0018_enrollment_tokens as migration

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        connection.execute("INSERT INTO orgs (name) VALUES ('Acme')")
        yield connection


def _insert(
    conn: psycopg.Connection[tuple[object, ...]],
    *,
    uses_allowed: int = 1,
    uses: int = 0,
    lives: timedelta = timedelta(hours=24),
) -> None:
    conn.execute(
        "INSERT INTO enrollment_tokens (org_id, secret_sha256, uses_allowed, uses, created_at,"
        " expires_at, created_by_kind) SELECT id, repeat('a', 64), %s, %s, %s, %s, 'operator'"
        " FROM orgs",
        [uses_allowed, uses, NOW, NOW + lives],
    )


@pytest.mark.parametrize(
    "row",
    [
        pytest.param({"uses_allowed": MAX_USES + 1}, id="too_many_uses"),
        pytest.param({"uses_allowed": 0}, id="no_use"),
        pytest.param({"uses_allowed": 2, "uses": 3}, id="more_spent_than_allowed"),
        pytest.param({"uses": -1}, id="negative_spent"),
        pytest.param({"lives": MAX_EXPIRES_IN + timedelta(seconds=1)}, id="over_30_days"),
        pytest.param({"lives": timedelta(0)}, id="expired_when_made"),
    ],
)
def test_the_database_refuses_a_token_out_of_bounds(
    conn: psycopg.Connection[tuple[object, ...]], row: dict[str, object]
) -> None:
    with pytest.raises(psycopg.errors.CheckViolation):
        _insert(conn, **row)  # type: ignore[arg-type]


def test_the_database_takes_a_token_at_its_bounds(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    _insert(conn, uses_allowed=MAX_USES, uses=MAX_USES, lives=MAX_EXPIRES_IN)


def test_the_migrations_literals_are_the_services_bounds() -> None:
    assert f"BETWEEN 1 AND {MAX_USES}" in migration.UPGRADE
    assert f"interval '{MAX_EXPIRES_IN.days} days'" in migration.UPGRADE
