"""The check every command makes before it works on a database, without Alembic: the head taken
from the migration files' names agrees with Alembic's own, every file keeps the naming that makes
that true, and a database behind the head (or never migrated, or unreachable) is refused by name."""

from __future__ import annotations

import importlib.util
import re
import socket

import psycopg
import pytest

from control_plane import migrate, schema_version
from control_plane.errors import DatabaseUnavailable
from tests.worlds.processes import run_child


def _revisions() -> list[tuple[str, str, str | None]]:
    """(file name, revision, down_revision) of every migration file, in file-name order."""
    found = []
    for path in sorted(schema_version.VERSIONS_DIR.glob("rev*.py")):
        spec = importlib.util.spec_from_file_location(f"migration_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        found.append((path.name, module.revision, module.down_revision))
    return found


def test_every_migration_file_is_named_for_its_revision_and_follows_the_one_before() -> None:
    revisions = _revisions()
    assert len(revisions) >= 11
    previous = None
    for name, revision, down_revision in revisions:
        assert name == f"rev{revision}.py", name
        assert re.fullmatch(r"\d{4}_[a-z0-9_]+", revision), revision
        assert down_revision == previous, (name, down_revision, previous)
        previous = revision


def test_the_head_from_the_file_names_is_alembics_head() -> None:
    assert schema_version.head_revision() == migrate.head_revision()


def test_a_migrated_database_passes_and_a_new_one_is_refused_by_name(
    database_url: str, empty_database_url: str
) -> None:
    schema_version.require_head(database_url)
    assert schema_version.current_revision(database_url) == migrate.current_revision(database_url)
    assert schema_version.current_revision(empty_database_url) is None
    with pytest.raises(DatabaseUnavailable) as caught:
        schema_version.require_head(empty_database_url)
    assert str(caught.value) == (
        f"the database is at revision (none), not {schema_version.head_revision()}: "
        "run `nachtwacht control migrate` first"
    )


def test_a_database_one_revision_behind_is_refused(database_url: str) -> None:
    *_, (_, before_head, _) = _revisions()[:-1]
    migrate.downgrade(database_url, before_head)
    with pytest.raises(DatabaseUnavailable, match=f"at revision {before_head}, not "):
        schema_version.require_head(database_url)


def test_an_unreachable_database_is_one_clear_error() -> None:
    with socket.socket() as probe:  # a closed loopback port
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DatabaseUnavailable, match="cannot read the schema's revision"):
        schema_version.current_revision(f"host=127.0.0.1 port={port} connect_timeout=2")


def _newer_revision() -> str:
    number = int(schema_version.head_revision()[:4]) + 1
    return f"{number:04d}_from_a_newer_release"


def _set_revision(database_url: str, revision: str) -> None:
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE alembic_version SET version_num = %s", (revision,))


def test_a_database_a_newer_release_migrated_is_served_and_left_as_it_is(
    database_url: str,
) -> None:
    # A rolling upgrade: the next release migrated the database, and one of this release's
    # replicas restarts before it is replaced.
    newer = _newer_revision()
    _set_revision(database_url, newer)
    schema_version.require_head(database_url)
    migrate.upgrade(database_url)
    assert schema_version.current_revision(database_url) == newer
    result = run_child("control", "migrate", "--database-url", database_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"database at revision {newer}, newer than this release's "
        f"{schema_version.head_revision()}: left as it is"
    )


@pytest.mark.parametrize("revision", ["0000_before_everything", "not_a_revision_of_ours"])
def test_a_revision_that_is_not_a_newer_releases_is_refused(
    database_url: str, revision: str
) -> None:
    _set_revision(database_url, revision)
    with pytest.raises(DatabaseUnavailable, match=f"at revision {revision}, not "):
        schema_version.require_head(database_url)
