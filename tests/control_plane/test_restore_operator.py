"""An operator's pass over `nachtwacht control after-restore` and `migrate` (docs/database.md): in
the wrong order, twice in a row, against the wrong server, with absurd arguments. Each is one line
(or the command's usual lines), the exit status the docs give, never a trace, and nothing else
changes: the rows of the tables the commands write, and no database made where none was."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest

from control_plane.migrate import head_revision
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Org, SignedRelease, table_rows
from tests.control_plane.reconcile_fleet import NIGHT
from tests.control_plane.test_after_restore import _claimed_run
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock

# What `after-restore` writes (and what `migrate` could).
WRITTEN = ("tokens", "answer_changes", "restored_timelines", "database_clusters", "events")


def _one_line(done: subprocess.CompletedProcess[str], status: int) -> str:
    """The command's one line on stderr, having exited `status`."""
    assert done.returncode == status, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def _public_tables(database_url: str) -> int:
    """How many tables the database holds: none where no command made any."""
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize(
    ("given", "made"),
    [
        pytest.param("--data-dir", False, id="no_such_directory"),
        pytest.param("--data-dir", True, id="an_empty_directory"),
        pytest.param("NACHTWACHT_DATA_DIR", False, id="from_the_environment"),
        pytest.param("NACHTWACHT_DATA_DIR", True, id="an_empty_directory_from_the_environment"),
    ],
)
def test_after_restore_on_a_data_dir_holding_no_database_is_refused_and_makes_none(
    tmp_path: Path, given: str, made: bool
) -> None:
    """A typo in `--data-dir` (or the environment's) after a restore: the command would start a
    new embedded server there, migrate it, and say `start the replicas now` of a database nobody
    restored."""
    data_dir = tmp_path / "nachtwacht-typo"
    if made:
        data_dir.mkdir()
    if given == "--data-dir":
        done = run_control("after-restore", "--data-dir", str(data_dir))
    else:
        done = run_control("after-restore", env={given: str(data_dir)})
    line = _one_line(done, 2)
    assert line.startswith(f"nachtwacht control after-restore: {given}: "), line
    assert str(data_dir) in line and "holds no database" in line, line
    assert done.stdout == ""
    assert data_dir.exists() == made
    assert not made or list(data_dir.iterdir()) == []


@pytest.mark.slow
def test_after_restore_on_a_data_dir_holding_its_server_runs(embedded_data_dir: Path) -> None:
    """The data directory a backup was restored into (here: one a command made) is used."""
    made = run_control("create-org", "Acme", "--data-dir", str(embedded_data_dir))
    assert made.returncode == 0, made.stderr
    done = run_control("after-restore", "--data-dir", str(embedded_data_dir), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tokens_revoked"] == 0


def test_after_restore_on_a_database_never_migrated_is_refused_and_creates_nothing(
    empty_database_url: str,
) -> None:
    """The wrong server (or database): one the control plane never used."""
    done = run_control("after-restore", "--database-url", empty_database_url)
    line = _one_line(done, 1)
    assert "run `nachtwacht control migrate` first" in line, line
    assert _public_tables(empty_database_url) == 0


def test_after_restore_twice_in_a_row_revokes_once_and_says_so(
    database_url: str,
    pool: Pool,
    clock: ManualClock,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    del published
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    clock.set(NIGHT + timedelta(minutes=2))
    _claimed_run(pool, agent.agent_id, org.org_id, expires_in=timedelta(days=3650))
    first = run_control("after-restore", "--database-url", database_url, "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["tokens_revoked"] == 1
    tokens = table_rows(pool, ("tokens",))
    second = run_control("after-restore", "--database-url", database_url, "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) | {"at": None} == {
        "tokens_revoked": 0,
        "feed_rows_cleared": json.loads(second.stdout)["feed_rows_cleared"],
        "at": None,
    }
    assert table_rows(pool, ("tokens",)) == tokens
    with pool.connection() as conn:
        restores = conn.execute(
            "SELECT count(*) AS n FROM events WHERE kind = 'platform.restored'"
        ).fetchone()
    assert restores is not None and restores["n"] == 2


@pytest.mark.parametrize(
    ("arguments", "status", "named"),
    [
        pytest.param(["--database-url", ""], 2, "--database-url", id="empty_url"),
        pytest.param(["--database-url", "not a url ==="], 2, "--database-url", id="not_a_url"),
        pytest.param(["--data-dir", "   "], 2, "--data-dir", id="blank_data_dir"),
        pytest.param(
            ["--database-url", "postgresql://127.0.0.1/x", "--data-dir", "/tmp"],
            2,
            "--database-url and --data-dir",
            id="both",
        ),
        pytest.param(["--even-with-replicas-connected=yes"], 2, None, id="flag_with_a_value"),
        pytest.param(["--json", "--json", "extra"], 2, None, id="a_stray_argument"),
    ],
)
def test_after_restore_with_absurd_arguments_is_one_line_and_changes_nothing(
    database_url: str, pool: Pool, arguments: list[str], status: int, named: str | None
) -> None:
    before = table_rows(pool, WRITTEN)
    done = run_control("after-restore", *arguments)
    line = _one_line(done, status)
    assert line.startswith("nachtwacht control"), line
    if named is not None:
        assert f"after-restore: {named}" in line, line
    assert done.stdout == ""
    assert table_rows(pool, WRITTEN) == before


def test_migrate_twice_in_a_row_changes_nothing_the_second_time(
    database_url: str, pool: Pool
) -> None:
    before = table_rows(pool, WRITTEN)
    for _ in range(2):
        done = run_control("migrate", "--database-url", database_url)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
    assert table_rows(pool, WRITTEN) == before


@pytest.mark.parametrize("seconds", ["0", "-1", "601", "nan", "inf", "1e400", "five"])
def test_migrate_with_an_absurd_lock_timeout_is_one_line_naming_it(
    empty_database_url: str, seconds: str
) -> None:
    done = run_control(
        "migrate", "--database-url", empty_database_url, "--lock-timeout-seconds", seconds
    )
    line = _one_line(done, 2)
    assert "--lock-timeout-seconds" in line, line
    assert _public_tables(empty_database_url) == 0


def test_migrate_to_an_older_revision_goes_nowhere_and_says_where_the_database_is(
    database_url: str, pool: Pool
) -> None:
    """`migrate` only goes forward: an older revision leaves the database at its own, said."""
    watched = table_rows(pool, WRITTEN)
    done = run_control(
        "migrate", "--database-url", database_url, "--revision", "0001_orgs_agents_credentials"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"database at revision {head_revision()}", done.stdout
    assert table_rows(pool, WRITTEN) == watched


@pytest.mark.parametrize(
    "revision",
    [
        pytest.param("9999_from_the_future", id="an_unknown_revision"),
        pytest.param("base", id="base"),
        pytest.param("-1", id="relative_down"),
        pytest.param("head; DROP TABLE runs", id="a_statement"),
        pytest.param("", id="empty"),
    ],
)
def test_migrate_to_an_absurd_revision_is_one_line_and_changes_nothing(
    database_url: str, pool: Pool, revision: str
) -> None:
    """Never a downgrade, never a trace."""
    with pool.connection() as conn:
        before = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    watched = table_rows(pool, WRITTEN)
    done = run_control("migrate", "--database-url", database_url, "--revision", revision)
    line = _one_line(done, 2)
    assert "--revision" in line, line
    with pool.connection() as conn:
        after = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        runs = conn.execute("SELECT to_regclass('runs') IS NOT NULL AS here").fetchone()
    assert after == before
    assert runs is not None and runs["here"]
    assert table_rows(pool, WRITTEN) == watched
