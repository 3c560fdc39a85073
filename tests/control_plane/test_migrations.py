"""The schema's migrations on a real PostgreSQL: on for everyone by default, one
time pattern, and a CHECK that does not let unknown pass for false."""

from __future__ import annotations

import importlib
import json
import subprocess
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.types.json import Jsonb

from control_plane import migrate
from shared_planner import MAX_TIMES, TIME_PATTERN
from tests.conftest import REPO_ROOT, child_environment, nachtwacht_command

BEFORE_SCHEDULE = "0001_orgs_agents_credentials"
SCHEDULE = "0002_agent_update_schedule"

schedule_migration = importlib.import_module(
    "control_plane.migrations.versions.rev0002_agent_update_schedule"
)


@pytest.fixture
def conn(database_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def _insert_org(conn: psycopg.Connection[tuple[object, ...]], name: str = "Acme") -> object:
    row = conn.execute("INSERT INTO orgs (name) VALUES (%s) RETURNING id", [name]).fetchone()
    assert row is not None
    return row[0]


def test_existing_agents_are_on_at_0300_after_the_schedule_migration(
    empty_database_url: str,
) -> None:
    migrate.upgrade(empty_database_url, BEFORE_SCHEDULE)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        org = _insert_org(conn)
        for name in ("web-01", "web-02", "db-01"):
            conn.execute("INSERT INTO agents (org_id, name) VALUES (%s, %s)", [org, name])

    migrate.upgrade(empty_database_url)

    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        existing = conn.execute(
            "SELECT update_schedule_enabled, update_schedule_times FROM agents"
        ).fetchall()
        assert existing == [(True, ["03:00"])] * 3
        # The default does the work: a row that names neither column gets the same schedule.
        inserted = conn.execute(
            "INSERT INTO agents (org_id, name) VALUES (%s, 'new-01')"
            " RETURNING update_schedule_enabled, update_schedule_times",
            [org],
        ).fetchone()
        assert inserted == (True, ["03:00"])


def test_schedule_defaults_live_in_the_schema(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    defaults = dict(
        conn.execute(
            "SELECT column_name, column_default FROM information_schema.columns"
            " WHERE table_name = 'agents' AND column_name LIKE 'update_schedule_%'"
        ).fetchall()
    )
    assert defaults == {
        "update_schedule_enabled": "true",
        "update_schedule_times": "'[\"03:00\"]'::jsonb",
    }


BAD_TIMES = [
    pytest.param("[3]", id="number"),
    pytest.param("[null]", id="null"),
    pytest.param('[{"a":1}]', id="object"),
    pytest.param('"03:00"', id="string_not_array"),
    pytest.param('{"times":["03:00"]}', id="object_not_array"),
    pytest.param('[["03:00"]]', id="nested_array_lax_unwrap"),
    pytest.param('["03:00", ["04:00"]]', id="nested_array_after_good"),
    pytest.param('["3:00"]', id="single_digit_hour"),
    pytest.param('["03:07"]', id="off_grid"),
    pytest.param('["24:00"]', id="hour_24"),
    pytest.param('["03:00\\n"]', id="trailing_newline"),
    pytest.param('[" 03:00"]', id="leading_space"),
    pytest.param('["03:00","03:00"]', id="duplicate"),
    pytest.param("[]", id="empty_when_enabled"),
    pytest.param(
        json.dumps([f"{h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)] + ["00:00"]),
        id="289_entries",
    ),
]


@pytest.mark.parametrize("times", BAD_TIMES)
def test_database_refuses_a_bad_schedule_on_insert(
    conn: psycopg.Connection[tuple[object, ...]], times: str
) -> None:
    org = _insert_org(conn)
    with pytest.raises(psycopg.errors.CheckViolation, match="agents_update_schedule_times_valid"):
        conn.execute(
            "INSERT INTO agents (org_id, name, update_schedule_times) VALUES (%s, 'x', %s::jsonb)",
            [org, times],
        )


@pytest.mark.parametrize("times", BAD_TIMES)
def test_database_refuses_a_bad_schedule_on_update(
    conn: psycopg.Connection[tuple[object, ...]], times: str
) -> None:
    org = _insert_org(conn)
    conn.execute("INSERT INTO agents (org_id, name) VALUES (%s, 'x')", [org])
    with pytest.raises(psycopg.errors.CheckViolation, match="agents_update_schedule_times_valid"):
        conn.execute("UPDATE agents SET update_schedule_times = %s::jsonb", [times])
    assert conn.execute("SELECT update_schedule_times FROM agents").fetchone() == (["03:00"],)


GOOD_TIMES = [
    pytest.param(True, ["03:00"], id="default"),
    pytest.param(True, ["00:00", "23:55"], id="day_edges"),
    pytest.param(True, ["13:30", "03:00"], id="unsorted"),
    pytest.param(False, [], id="empty_when_disabled"),
    pytest.param(False, ["03:00"], id="disabled_keeps_times"),
    pytest.param(
        True,
        [f"{h:02d}:{m:02d}" for h in range(24) for m in range(0, 60, 5)],
        id="all_288",
    ),
]


@pytest.mark.parametrize(("enabled", "times"), GOOD_TIMES)
def test_database_accepts_a_good_schedule(
    conn: psycopg.Connection[tuple[object, ...]], enabled: bool, times: list[str]
) -> None:
    org = _insert_org(conn)
    row = conn.execute(
        "INSERT INTO agents (org_id, name, update_schedule_enabled, update_schedule_times)"
        " VALUES (%s, 'x', %s, %s) RETURNING update_schedule_times",
        [org, enabled, Jsonb(times)],
    ).fetchone()
    assert row == (times,)


NAIVE_JSONPATH = f'strict $[*] ? (!(@ like_regex "{TIME_PATTERN}"))'


@pytest.mark.parametrize(
    "times",
    [
        pytest.param("[3]", id="number"),
        pytest.param("[null]", id="null"),
        pytest.param('[{"a":1}]', id="object"),
    ],
)
def test_naive_filter_without_type_test_would_accept_non_strings(
    conn: psycopg.Connection[tuple[object, ...]], times: str
) -> None:
    # Rule 4: a regex match on a non-string is unknown and !unknown is unknown, so the naive filter
    # selects nothing and "nothing bad selected" holds. The real constraint tests the type first.
    naive_accepts, real_accepts = conn.execute(
        "SELECT NOT (%(t)s::jsonb @? %(naive)s::jsonpath),"
        " NOT (%(t)s::jsonb @? %(real)s::jsonpath)",
        {"t": times, "naive": NAIVE_JSONPATH, "real": schedule_migration.BAD_ELEMENTS_JSONPATH},
    ).fetchone() or (None, None)
    assert naive_accepts is True
    assert real_accepts is False


def test_lax_mode_would_unwrap_a_nested_array(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    real = schedule_migration.BAD_ELEMENTS_JSONPATH
    lax = real.replace("strict ", "lax ", 1)
    assert real.startswith("strict ")
    lax_accepts, strict_accepts = conn.execute(
        "SELECT NOT (%(t)s::jsonb @? %(lax)s::jsonpath), NOT (%(t)s::jsonb @? %(real)s::jsonpath)",
        {"t": '[["03:00"]]', "lax": lax, "real": real},
    ).fetchone() or (None, None)
    assert lax_accepts is True
    assert strict_accepts is False


def test_constraint_uses_the_planners_time_pattern(
    conn: psycopg.Connection[tuple[object, ...]],
) -> None:
    assert f'like_regex "{TIME_PATTERN}"' in schedule_migration.BAD_ELEMENTS_JSONPATH
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint"
        " WHERE conname = 'agents_update_schedule_times_valid'"
    ).fetchone()
    assert row is not None
    definition = str(row[0])
    assert TIME_PATTERN in definition
    assert f"<= {MAX_TIMES}" in definition


def test_the_schedule_revision_holds_the_schedule_alone() -> None:
    first = importlib.import_module(
        "control_plane.migrations.versions.rev0001_orgs_agents_credentials"
    )
    assert "update_schedule" not in first.UPGRADE
    assert schedule_migration.revision == SCHEDULE
    assert schedule_migration.down_revision == BEFORE_SCHEDULE
    assert "DEFAULT true" in schedule_migration.UPGRADE
    assert "DEFAULT '[\"03:00\"]'" in schedule_migration.UPGRADE


def test_downgrade_and_upgrade_again_on_a_database_with_data(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        org = _insert_org(conn)
        conn.execute(
            "INSERT INTO agents (org_id, name, update_schedule_enabled, update_schedule_times)"
            " VALUES (%s, 'web-01', false, '[\"04:00\"]')",
            [org],
        )

    migrate.downgrade(database_url, BEFORE_SCHEDULE)
    with psycopg.connect(database_url, autocommit=True) as conn:
        assert conn.execute("SELECT name FROM agents").fetchall() == [("web-01",)]
    migrate.upgrade(database_url)
    with psycopg.connect(database_url, autocommit=True) as conn:
        # The schedule went with its columns; the default puts the agent back on at 03:00.
        assert conn.execute(
            "SELECT name, update_schedule_enabled, update_schedule_times FROM agents"
        ).fetchall() == [("web-01", True, ["03:00"])]

    migrate.downgrade(database_url, "base")
    migrate.upgrade(database_url)
    assert migrate.current_revision(database_url) == migrate.head_revision()


def test_every_migration_applies_to_an_empty_database(postgres_admin_url: str) -> None:
    applied = migrate.check_migrations(postgres_admin_url)
    assert applied[:2] == [BEFORE_SCHEDULE, SCHEDULE]
    assert applied[-1] == migrate.head_revision()


def test_replicas_migrating_at_once_take_turns(empty_database_url: str) -> None:
    # Separate processes, as replicas are (Alembic itself is not for threads).
    processes = [
        subprocess.Popen(
            nachtwacht_command("control", "migrate", "--database-url", empty_database_url),
            env=child_environment(),
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    results = [(process.wait(), process.communicate()[1]) for process in processes]
    assert results == [(0, "")] * 3
    assert migrate.current_revision(empty_database_url) == migrate.head_revision()
