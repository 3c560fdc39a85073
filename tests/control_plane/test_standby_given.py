"""An operator at 03:10 gives a command the standby's URL where the primary's belongs (the failover
went the other way, or the two were mixed up): a command that only reads works, one that writes is
refused in one line that says the server is a read-only standby and what to give instead — never
PostgreSQL's stack trace — and nothing is written anywhere."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import psycopg
import pytest

from tests.conftest import REPO_ROOT, child_environment, nachtwacht_command
from tests.control_plane.test_cli import run_control
from tests.worlds.replicated_postgres import ReplicatedPair, replicated_pair

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pair() -> Iterator[ReplicatedPair]:
    with replicated_pair() as made:
        migrated = run_control("migrate", "--database-url", made.primary.url)
        assert migrated.returncode == 0, migrated.stderr
        made.wait_caught_up()
        yield made


def _trail(url: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT (SELECT count(*) FROM orgs), (SELECT count(*) FROM events),"
            " (SELECT count(*) FROM enrollment_tokens), (SELECT engaged FROM platform_brake)"
        ).fetchall()


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["after-restore"], id="after_restore"),
        pytest.param(["create-org", "Acme"], id="create_org"),
        pytest.param(["brake", "engage", "--reason", "night of the failover"], id="brake"),
        pytest.param(["create-operator-key", "--name", "night"], id="operator_key"),
    ],
)
def test_a_write_to_a_standby_is_refused_in_one_line_and_writes_nothing(
    pair: ReplicatedPair, command: list[str]
) -> None:
    before = _trail(pair.primary.url)
    result = run_control(*command, "--database-url", pair.standby.url)
    assert result.returncode == 2, result.stdout
    assert "Traceback" not in result.stderr
    line = result.stderr.strip()
    assert len(line.splitlines()) == 1, result.stderr
    assert line.startswith(f"nachtwacht control {command[0]}: "), line
    assert "read-only standby" in line, line
    assert "target_session_attrs=read-write" in line, line
    assert result.stdout == ""
    pair.wait_caught_up()
    assert _trail(pair.primary.url) == before
    assert _trail(pair.standby.url) == before


def test_a_command_that_only_reads_works_on_a_standby(pair: ReplicatedPair) -> None:
    listed = run_control("trust-root", "list", "--database-url", pair.standby.url)
    assert listed.returncode == 0, listed.stderr
    assert "no trust root published" in listed.stdout


def test_migrating_a_standby_is_refused_in_one_line() -> None:
    """Its primary not migrated yet (a new cluster, or a release's first migrate): `migrate` given
    the standby says so and what to give instead; exit 1 as every migration that fails on the
    database's side (`serve`, which migrates first, says the same)."""
    with replicated_pair() as fresh:
        result = run_control("migrate", "--database-url", fresh.standby.url)
        assert result.returncode == 1, result.stdout
        assert "Traceback" not in result.stderr
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1, result.stderr
        assert line.startswith(
            "nachtwacht control migrate: migration failed: the database is a read-only standby"
        ), line
        assert "target_session_attrs=read-write" in line, line
        with psycopg.connect(fresh.primary.url) as conn:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            ).fetchone()
        assert tables == (0,)


def test_after_restore_on_a_server_waiting_for_a_standby_it_lacks_says_so_at_once() -> None:
    """A base backup keeps the old primary's `synchronous_standby_names`: restored without a
    standby, every commit waits for one for ever. `after-restore` says so and what to set, in
    one line, instead of waiting without a word; nothing is changed."""
    with replicated_pair(synchronous=True) as pair:
        migrated = run_control("migrate", "--database-url", pair.primary.url)
        assert migrated.returncode == 0, migrated.stderr
        pair.stop(pair.standby)
        result = subprocess.run(
            nachtwacht_command("control", "after-restore", "--database-url", pair.primary.url),
            env=child_environment(None),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert result.returncode == 2, result.stdout
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1, result.stderr
        assert line.startswith(
            "nachtwacht control after-restore: the server waits for a synchronous standby"
        ), line
        assert "synchronous_standby_names = ''" in line, line
        with psycopg.connect(pair.primary.url) as conn:
            restored = conn.execute(
                "SELECT count(*) FROM events WHERE kind = 'platform.restored'"
            ).fetchone()
        assert restored == (0,)
