"""Migration 0010 on a real PostgreSQL: releases already out there are `everyone` and
the column's default makes a new one `canary`; the constraints refuse what the services never
write (a second open halt, a second notice per halt, a pin with two scopes, a hold that ends
before it starts, a brake without a reason); it downgrades and upgrades again with data."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import psycopg
import pytest

from control_plane import migrate

rollout_migration = importlib.import_module(
    "control_plane.migrations.versions.rev0010_rollout_pins_halts"
)
BEFORE = rollout_migration.down_revision

_RELEASE = (
    "INSERT INTO releases (manifest_version, agent_version, channel, platform, issued_at,"
    " expires, length, sha256, key_id, manifest, signature, published_at)"
    " VALUES (%s, %s, 'stable', 'linux-x86_64', now(), now() + interval '30 days', 1,"
    " repeat('a', 64), 'k', '\\x00', '\\x00', now()) RETURNING id"
)


def _one(conn: psycopg.Connection[tuple[object, ...]], sql: str, *params: object) -> object:
    row = conn.execute(sql, list(params)).fetchone()
    assert row is not None
    return row[0]


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def test_published_releases_are_for_everyone_and_a_new_one_starts_as_canary(
    empty_database_url: str,
) -> None:
    assert BEFORE is not None
    migrate.upgrade(empty_database_url, BEFORE)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        _one(conn, _RELEASE, 1, "1.5.0")
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert conn.execute("SELECT stage FROM releases").fetchall() == [("everyone",)]
        # The default does the work: a release inserted without naming its stage is a canary.
        new = _one(conn, _RELEASE, 2, "1.6.0")
        assert _one(conn, "SELECT stage FROM releases WHERE id = %s", new) == "canary"
        settings = conn.execute(
            "SELECT canary_share_percent, soak_minutes, halt_failures, halt_rate_percent,"
            " halt_window_minutes FROM rollout_settings"
        ).fetchall()
        assert settings == [(5, 720, 3, 20, 360)]


def test_one_open_halt_per_release_and_one_notice_per_halt(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    release = _one(conn, _RELEASE, 1, "1.5.0")
    halt = (
        "INSERT INTO release_halts (release_id, halted_at, cause, reason, halted_by)"
        " VALUES (%s, now(), 'errors', 'three failed', 'rollout') RETURNING id"
    )
    first = _one(conn, halt, release)
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(halt, [release])
    notice = (
        "INSERT INTO operator_notices (kind, halt_id, created_at, body)"
        " VALUES ('release.halted', %s, now(), '{}')"
    )
    conn.execute(notice, [first])
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute(notice, [first])
    with pytest.raises(psycopg.errors.CheckViolation):  # resumed without saying why
        conn.execute("UPDATE release_halts SET resumed_at = now(), resume_reason = ' '")
    conn.execute("UPDATE release_halts SET resumed_at = now(), resume_reason = 'fixed'")
    _one(conn, halt, release)  # once resumed, a new halt may open


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("UPDATE releases SET stage = 'beta'", id="unknown_stage"),
        pytest.param("UPDATE releases SET braked_at = now()", id="brake_without_reason"),
        pytest.param(
            "INSERT INTO pins (org_id, agent_id, version, set_at, set_by)"
            " SELECT a.org_id, a.id, '1.5.0', now(), 'ops' FROM agents a",
            id="pin_with_two_scopes",
        ),
        pytest.param(
            "INSERT INTO pins (version, set_at, set_by) VALUES ('1.5.0', now(), 'ops')",
            id="pin_without_scope",
        ),
        pytest.param(
            "INSERT INTO holds (agent_id, until, set_by, set_at)"
            " SELECT id, now() - interval '1 minute', 'customer', now() FROM agents",
            id="hold_ending_before_it_starts",
        ),
        pytest.param(
            "INSERT INTO holds (agent_id, until, set_by, set_at)"
            " SELECT id, now() + interval '1 day', 'somebody', now() FROM agents",
            id="hold_by_an_unknown_setter",
        ),
        pytest.param("UPDATE rollout_settings SET halt_failures = 0", id="halt_on_no_failures"),
    ],
)
def test_the_database_refuses_what_the_services_never_write(
    conn: psycopg.Connection[tuple[object, ...]], statement: str
) -> None:
    _one(conn, _RELEASE, 1, "1.5.0")
    org = _one(conn, "INSERT INTO orgs (name) VALUES ('Acme') RETURNING id")
    conn.execute("INSERT INTO agents (org_id, name) VALUES (%s, 'web-01')", [org])
    with pytest.raises(psycopg.errors.CheckViolation):
        conn.execute(statement)


def test_downgrade_and_upgrade_again_with_a_held_run_and_a_halt(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        release = _one(conn, _RELEASE, 1, "1.5.0")
        org = _one(conn, "INSERT INTO orgs (name) VALUES ('Acme') RETURNING id")
        agent = _one(
            conn, "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id", org
        )
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
            " miss_reason, created_at) VALUES (%s, %s, 'schedule', '2026-11-30T03:00',"
            " '2026-11-30T02:00Z', 'missed', 'held', now())",
            [agent, org],
        )
        conn.execute(
            "INSERT INTO release_halts (release_id, halted_at, cause, reason, halted_by)"
            " VALUES (%s, now(), 'operator', 'looks wrong', 'ops')",
            [release],
        )
    assert BEFORE is not None
    migrate.downgrade(database_url, BEFORE)
    migrate.upgrade(database_url)
    assert migrate.current_revision(database_url) == migrate.head_revision()
