"""Repository-wide fixtures: one real PostgreSQL per test session, a fresh database per test, and
the control plane as a real process.

PostgreSQL
    With pytest-xdist (the default: `-n auto` in pyproject) every worker is its own session, so
    each worker starts its own server and template: workers share nothing but the machine.
    The session starts ONE embedded PostgreSQL (`pgserver`, in a temporary directory) — or, when
    `NACHTWACHT_DATABASE_URL` is set, uses that server (its role needs CREATEDB). It migrates one
    template database to head once; each test that asks gets its own copy
    (`CREATE DATABASE … TEMPLATE …`), made ahead and dropped afterwards by a thread of the session
    (`_DatabaseSupply`), so no test waits for either.
    The embedded server runs without fsync (`_without_durability`): a test server needs no crash
    safety, and with it each `DROP DATABASE` waits for a checkpoint. Its data lives in
    /dev/shm when there is room (`scratch_dir`): on the disk, copying and deleting each test's
    database made PostgreSQL the suite's largest user of CPU.

    `database_url`          a fresh database migrated to head; a libpq URL/conninfo string.
    `empty_database_url`    a fresh database with no tables at all (for migration tests).
    `postgres_admin_url`    (session) the server's maintenance database, to create your own.

The control plane as a process
    `control_plane_server(...)` starts `nachtwacht control serve --host 127.0.0.1 --port 0
    --database-url <the test's database_url> --no-migrate` (a copy of the migrated template;
    with a `database_url` of the test's own, `serve` migrates it) as a process of its own with the
    demo's starter (`nachtwacht.demo_world.control_planes`), forked from the worker's fork server,
    which has imported the app once (`tests.worlds.processes`; the admin commands below are forked
    from it too), waits for its "ready at URL" line and returns a
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

import itertools
import os
import queue
import secrets
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from control_plane.database import ensure_server_user
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.errors import WorldError

# The tests of the control plane's CLI import these from here; they live in the world kit.
from tests.worlds.processes import FORKED, REPO_ROOT, child_environment, nachtwacht_command
from tests.worlds.scratch import scratch_dir
from tests.worlds.waiting import wait_until

__all__ = ["REPO_ROOT", "RunningControlPlane", "child_environment", "nachtwacht_command"]

DATABASE_URL_ENV = "NACHTWACHT_DATABASE_URL"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: two workers per core. The end-to-end nights spend most of their minute waiting
    for the fake clock (a daemon's next product minute, a catch-up window), not computing: with
    fewer workers the cores stand idle while every worker waits."""
    del config
    return max(2, 2 * (os.cpu_count() or 1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The `slow` tests (real processes, nights on a fast clock, a browser through many screens:
    up to a minute and a half each) first: started last, one of them ran alone while the other
    workers were idle; started first, the short tests fill the workers around them.

    Under xdist's `worksteal` "first" means first in *each worker's* share: it hands every worker
    one contiguous slice of this order at the start, and a worker that runs dry steals the second
    half of the longest queue. Slow tests sorted merely to the front all landed in the first
    worker's slice, which ran them one after another while the others stole its short tests; the
    last of them started late and ran alone. So the order is cut into the slices xdist will cut,
    and each slice gets its round-robin share of the slow tests at its head."""
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    fast = [item for item in items if item.get_closest_marker("slow") is None]
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = _dealt(slow, fast, workers)


def _dealt(slow: list[Any], fast: list[Any], workers: int) -> list[Any]:
    """`slow` dealt round-robin over `workers` slices, each filled up with `fast` to the size
    worksteal's first distribution gives it (the pending list split evenly over the idle
    workers, in order: len // workers, then the rest // (workers - 1), …)."""
    total = len(slow) + len(fast)
    sizes = []
    left = total
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    dealt: list[Any] = []
    fast_left = iter(fast)
    for index, size in enumerate(sizes):
        share = slow[index::workers]
        dealt += share
        dealt += itertools.islice(fast_left, max(0, size - len(share)))
    dealt += list(fast_left)  # only when the slow tests outnumber a slice: nothing is lost
    return dealt


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
    home = Path(tempfile.mkdtemp(prefix="nachtwacht-test-pg-", dir=scratch_dir()))
    home.chmod(0o755)
    ensure_server_user()  # every worker starts its server at once, on a fresh host too
    server = pgserver.get_server(home / "pgdata", cleanup_mode="stop")
    try:
        admin_url = str(server.get_uri())
        _without_durability(admin_url)
        yield admin_url
    finally:
        server.cleanup()
        shutil.rmtree(home, ignore_errors=True)


# A throw-away server needs no crash safety: every commit's fsync and every `DROP DATABASE`'s
# checkpoint is disk work the tests only wait for. Only the session's own embedded server; an
# external `NACHTWACHT_DATABASE_URL` keeps its settings. No test depends on surviving an
# operating-system crash.
_NO_DURABILITY = ("fsync", "synchronous_commit", "full_page_writes")


def _without_durability(admin_url: str) -> None:
    for setting in _NO_DURABILITY:
        _admin_execute(admin_url, f"ALTER SYSTEM SET {setting} = off")
    _admin_execute(admin_url, "SELECT pg_reload_conf()")


def _new_database(admin_url: str, *, template: str | None = None) -> str:
    name = f"nachtwacht_test_{secrets.token_hex(6)}"
    clause = f' TEMPLATE "{template}"' if template else ""
    _admin_execute(admin_url, f'CREATE DATABASE "{name}"{clause}')
    return name


def _drop_database(admin_url: str, name: str) -> None:
    _admin_execute(admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class _DatabaseSupply:
    """Copies of the migrated template made ahead of the tests that ask for one, and dropped
    behind them, by one thread: a test neither waits for its `CREATE DATABASE` nor for the
    `DROP` of the one before (each about half a second on the 2-core machine under load).

    Only this thread runs `CREATE DATABASE … TEMPLATE`, so the template is never copied twice at
    once (PostgreSQL refuses a template with another session on it). A copy made ahead is the
    same as one made on demand: the template does not change during the session."""

    def __init__(self, admin_url: str, template: str, *, ahead: int = 2) -> None:
        self._admin_url = admin_url
        self._template = template
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=ahead)
        self._used: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._working = False  # set before the thread looks for work, cleared when it has none
        self._thread = threading.Thread(target=self._run, name="test-databases", daemon=True)
        self._thread.start()

    def take(self) -> str:
        ready = self._ready.get(timeout=120)
        if isinstance(ready, BaseException):
            raise ready
        return ready

    def give_back(self, name: str) -> None:
        self._used.put(name)

    def wait_until_idle(self, timeout: float = 120.0) -> None:
        """Return once the thread has nothing left to make or drop: from then on this server
        assigns no transaction id but the calling test's (a CREATE or DROP DATABASE takes one,
        and transaction ids are the whole server's)."""
        wait_until(
            lambda: self._ready.full() and self._used.empty() and not self._working,
            what="the test databases' thread to have nothing left to make or drop",
            timeout=timeout,
            interval=0.01,
        )

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        leftovers = []
        while not self._ready.empty():
            ready = self._ready.get()
            if isinstance(ready, str):
                leftovers.append(ready)
        while not self._used.empty():
            leftovers.append(self._used.get())
        for name in leftovers:
            _drop_database(self._admin_url, name)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._working = True
            try:
                name = self._used.get_nowait()
            except queue.Empty:
                pass
            else:
                _drop_database(self._admin_url, name)
                continue
            if self._ready.full():
                self._working = False
                self._stop.wait(0.02)
                continue
            try:
                made: str | BaseException = _new_database(self._admin_url, template=self._template)
            except Exception as exc:  # handed to the test that takes it
                made = exc
            self._ready.put(made)


@pytest.fixture(scope="session")
def _migrated_template(postgres_admin_url: str) -> Iterator[str]:
    from control_plane import migrate

    name = _new_database(postgres_admin_url)
    migrate.upgrade(_with_dbname(postgres_admin_url, name))
    try:
        yield name
    finally:
        _drop_database(postgres_admin_url, name)


@pytest.fixture(scope="session")
def _database_supply(postgres_admin_url: str, _migrated_template: str) -> Iterator[_DatabaseSupply]:
    supply = _DatabaseSupply(postgres_admin_url, _migrated_template)
    try:
        yield supply
    finally:
        supply.close()


@pytest.fixture
def database_url(postgres_admin_url: str, _database_supply: _DatabaseSupply) -> Iterator[str]:
    """A fresh database of this test's own, migrated to head."""
    name = _database_supply.take()
    try:
        yield _with_dbname(postgres_admin_url, name)
    finally:
        _database_supply.give_back(name)


@pytest.fixture
def own_transaction_ids(_database_supply: _DatabaseSupply) -> bool:
    """Whether, from now on, every transaction id this test's server assigns is the test's own:
    true on the session's embedded server once its database thread is idle; false on an external
    `NACHTWACHT_DATABASE_URL`, which other workers (and anyone) share."""
    if os.environ.get(DATABASE_URL_ENV):
        return False
    _database_supply.wait_until_idle()
    return True


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
    home = Path(tempfile.mkdtemp(prefix="nachtwacht-test-data-", dir=scratch_dir()))
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
    # Taken while this fixture is set up, so the database is given back (and dropped) only after
    # every server started here has stopped: a server whose database was dropped under it waits
    # for its pool before it stops.
    own_database_url: str = request.getfixturevalue("database_url")
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
            database_url = own_database_url
            # A copy of the migrated template: `serve` need not load Alembic to migrate it again
            # (it still refuses a database behind the head, which this is not).
            args = ["--no-migrate", *args]
        stderr_path = tmp_path / f"control-plane-{len(started)}.stderr"
        try:
            running = start_control_plane(
                stderr_path=stderr_path,
                database_url=database_url if data_dir is None else None,
                data_dir=data_dir,
                fake_clock=fake_clock,
                env=env,
                args=args,
                launcher=FORKED,
            )
        except WorldError as exc:
            stderr = stderr_path.read_text(errors="replace")
            raise AssertionError(f"{exc}; stderr:\n{stderr}") from exc
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
