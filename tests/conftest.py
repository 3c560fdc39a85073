"""Repository-wide fixtures: one real PostgreSQL per test session, a fresh database per test, and
the control plane as a real process.

PostgreSQL
    With pytest-xdist (the default: `-n auto` in pyproject) every worker is its own session, so
    each worker starts its own server and template: workers share nothing but the machine.
    The session starts ONE embedded PostgreSQL (`pgserver`, in a temporary directory) — or, when
    `NACHTWACHT_DATABASE_URL` is set, uses that server (its role needs CREATEDB). It migrates one
    template database to head once; each test that asks gets its own copy
    (`CREATE DATABASE … TEMPLATE …`, a file copy, milliseconds) and it is dropped afterwards.

    `database_url`          a fresh database migrated to head; a libpq URL/conninfo string.
    `empty_database_url`    a fresh database with no tables at all (for migration tests).
    `postgres_admin_url`    (session) the server's maintenance database, to create your own.

The control plane as a process
    `control_plane_server(...)` starts `nachtwacht control serve --host 127.0.0.1 --port 0
    --database-url <the test's database_url>` as a subprocess with the world kit
    (`nachtwacht.worlds.control_planes`), waits for its "ready at URL" line and returns a
    `RunningControlPlane`; every server still running at the end of the test gets SIGTERM.
    Keyword arguments:
        fake_clock="2026-11-30T01:55:00Z,anchor=…,speed=60"   sets NACHTWACHT_FAKE_CLOCK
        env={...}           extra environment (e.g. NACHTWACHT_RELEASE_PUBLIC_KEYS)
        args=[...]          extra `serve` flags (e.g. ["--org-cap", "2"])
        database_url=...    another database (default: this test's `database_url`; two calls
                            share it, which is how two replicas are tested)
        data_dir=Path       use the embedded PostgreSQL in that directory instead (then
                            `database_url` is "" and `.admin` passes `--data-dir`); take it from
                            the `embedded_data_dir` fixture: pytest's tmp_path is mode 0700, and
                            as root the embedded server runs as its own system user
    `RunningControlPlane` has `base_url`, `database_url`, `stderr_path` and
        `.admin("create-org", "Acme")` → the parsed `--json` output of `nachtwacht control …`,
        `.create_org(name)`, `.enroll_agent(org_id, name)`, `.create_operator_key()`,
        `.stop()` → the exit code after SIGTERM.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from nachtwacht.worlds.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.worlds.errors import WorldError

# The tests of the control plane's CLI import these from here; they live in the world kit.
from nachtwacht.worlds.processes import REPO_ROOT, child_environment, nachtwacht_command

__all__ = ["REPO_ROOT", "RunningControlPlane", "child_environment", "nachtwacht_command"]

DATABASE_URL_ENV = "NACHTWACHT_DATABASE_URL"


def _with_dbname(url: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo("", **params)


def _admin_execute(admin_url: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(statement)


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """The maintenance database of this session's PostgreSQL server."""
    external = os.environ.get(DATABASE_URL_ENV)
    if external:
        yield external
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # platformdirs: no XDG_RUNTIME_DIR
        import pgserver

    # Not under pytest's tmp_path: pytest keeps /tmp/pytest-of-<user> at mode 0700 (and re-applies
    # it when any other session starts), while the server runs as its own system user when the
    # tests run as root and must be able to reach its data directory.
    home = Path(tempfile.mkdtemp(prefix="nachtwacht-test-pg-"))
    home.chmod(0o755)
    server = pgserver.get_server(home / "pgdata", cleanup_mode="stop")
    try:
        yield str(server.get_uri())
    finally:
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


def _new_database(admin_url: str, *, template: str | None = None) -> str:
    name = f"nachtwacht_test_{secrets.token_hex(6)}"
    clause = f' TEMPLATE "{template}"' if template else ""
    _admin_execute(admin_url, f'CREATE DATABASE "{name}"{clause}')
    return name


@pytest.fixture(scope="session")
def _migrated_template(postgres_admin_url: str) -> Iterator[str]:
    from control_plane import migrate

    name = _new_database(postgres_admin_url)
    migrate.upgrade(_with_dbname(postgres_admin_url, name))
    try:
        yield name
    finally:
        _admin_execute(postgres_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def database_url(postgres_admin_url: str, _migrated_template: str) -> Iterator[str]:
    """A fresh database of this test's own, migrated to head."""
    name = _new_database(postgres_admin_url, template=_migrated_template)
    try:
        yield _with_dbname(postgres_admin_url, name)
    finally:
        _admin_execute(postgres_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_database_url(postgres_admin_url: str) -> Iterator[str]:
    """A fresh database with nothing in it, not even the migrations' version table."""
    name = _new_database(postgres_admin_url)
    try:
        yield _with_dbname(postgres_admin_url, name)
    finally:
        _admin_execute(postgres_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def embedded_data_dir() -> Iterator[Path]:
    """An empty directory the embedded PostgreSQL's system user can reach; removed afterwards."""
    home = Path(tempfile.mkdtemp(prefix="nachtwacht-test-data-"))
    home.chmod(0o755)
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def control_plane_server(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[Callable[..., RunningControlPlane]]:
    """A factory that starts `nachtwacht control serve` as a real process (see module docstring)."""
    started: list[RunningControlPlane] = []

    def start(
        *,
        fake_clock: str | None = None,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
        database_url: str | None = None,
        data_dir: Path | None = None,
    ) -> RunningControlPlane:
        if data_dir is None and database_url is None:
            database_url = request.getfixturevalue("database_url")
        stderr_path = tmp_path / f"control-plane-{len(started)}.stderr"
        try:
            running = start_control_plane(
                stderr_path=stderr_path,
                database_url=database_url if data_dir is None else None,
                data_dir=data_dir,
                fake_clock=fake_clock,
                env=env,
                args=args,
            )
        except WorldError as exc:
            stderr = stderr_path.read_text(errors="replace")
            raise AssertionError(f"{exc}; stderr:\n{stderr}") from exc
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
