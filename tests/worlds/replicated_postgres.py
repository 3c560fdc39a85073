"""A primary PostgreSQL and its streaming standby on loopback, from pgserver's own binaries.

    with replicated_pair() as pair:                  # primary up, standby streaming from it
        pair.url                 # both hosts, target_session_attrs=read-write
        pair.kill(pair.primary)                      # SIGKILL: the postmaster and its backends
        pair.promote(pair.standby)                   # `pg_ctl promote`, waits until writable
        pair.start(pair.primary)                     # the old primary, read-write, by mistake

Each server is `initdb`/`pg_ctl` run as the embedded server's system user when the tests run as
root (PostgreSQL refuses to run as root). The standby is `pg_basebackup -R` of the primary.
`synchronous=True` makes the primary wait for the standby at every commit
(`synchronous_standby_names`, set on the primary after the base backup, so a promoted standby
does not wait for a standby it does not have).

    with archived_primary() as servers:              # one primary, its WAL archived
        servers.base_backup(path)                    # `pg_basebackup`, plain format
        servers.archive_current_wal()                # `pg_switch_wal()`, waits for the copy
        servers.restore(path, node, settings={"recovery_target_name": "x", …})

The primary archives every finished WAL segment into `servers.archive` (`archive_command`, a
`cp` that never overwrites); `restore` copies a base backup into the node's data directory and
starts it with `restore_command`, the recovery target and `recovery.signal`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from control_plane.database import SERVER_USER, ensure_server_user
from tests.worlds.scratch import scratch_dir

__all__ = [
    "ArchivedPrimary",
    "PostgresNode",
    "PostgresServers",
    "ReplicatedPair",
    "archived_primary",
    "replicated_pair",
]

DATABASE = "nachtwacht"
STANDBY_NAME = "standby1"
# A deadline for a failure, not a speed expectation.
DEADLINE_SECONDS = 60.0


def _bin(name: str) -> str:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # platformdirs: no XDG_RUNTIME_DIR
        from pgserver._commands import POSTGRES_BIN_PATH
    return str(POSTGRES_BIN_PATH / name)


def _run(*command: str) -> str:
    user = SERVER_USER if os.geteuid() == 0 else None
    # Files, not pipes: the server `pg_ctl start` leaves running would hold a pipe open, and
    # reading it to its end would wait for the server to stop.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        done = subprocess.run(
            command,
            check=False,
            stdout=out,
            stderr=err,
            text=True,
            user=user,
            timeout=DEADLINE_SECONDS,
        )
        out.seek(0)
        err.seek(0)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {err.read().strip()}")
        return out.read()


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (PostgreSQL's backends and helpers), from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The parent's pid follows the state, after the parenthesised command name.
        fields = stat.rpartition(")")[2].split()
        if len(fields) > 1 and fields[1] == str(pid):
            found.append(int(entry.name))
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class PostgresNode:
    name: str
    pgdata: Path
    port: int
    options: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname={DATABASE} user=postgres"

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, IndexError, ValueError):
            return None


@dataclass(kw_only=True)
class PostgresServers:
    """The servers under one scratch directory, started and stopped with pgserver's `pg_ctl`."""

    home: Path

    def start(self, node: PostgresNode, *, options: list[str] | None = None) -> None:
        flags = [
            f"-p {node.port}",
            "-c listen_addresses=127.0.0.1",
            f"-k {node.pgdata}",
            "-c fsync=off",  # a killed process, not a crashed machine: the page cache keeps it
            *(node.options if options is None else options),
        ]
        log = node.pgdata.parent / f"{node.name}.log"
        _run(
            _bin("pg_ctl"),
            "-D",
            str(node.pgdata),
            "-l",
            str(log),
            "-w",
            "-o",
            " ".join(flags),
            "start",
        )

    def kill(self, node: PostgresNode) -> None:
        """SIGKILL the postmaster and every backend: the machine's PostgreSQL gone at once."""
        pid = node.postmaster_pid()
        if pid is None:
            return
        # Stopped first, so it forks no backend between the listing and the kill.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        family = [pid, *_children(pid)]
        for member in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)
        deadline = time.monotonic() + DEADLINE_SECONDS
        # Until reaped, not only dead: a new postmaster refuses to start while the old one's pid
        # (a zombie until its new parent reaps it) still answers `kill(pid, 0)`.
        while any(Path(f"/proc/{member}").exists() for member in family):
            if time.monotonic() > deadline:
                raise TimeoutError(f"PostgreSQL {node.name} outlived SIGKILL")
            time.sleep(0.02)

    def stop(self, node: PostgresNode) -> None:
        if node.postmaster_pid() is not None:
            with contextlib.suppress(RuntimeError):
                _run(_bin("pg_ctl"), "-D", str(node.pgdata), "-m", "immediate", "-w", "stop")

    def promote(self, node: PostgresNode) -> None:
        _run(_bin("pg_ctl"), "-D", str(node.pgdata), "-w", "promote")

    def is_writable(self, node: PostgresNode) -> bool:
        try:
            with psycopg.connect(node.url, connect_timeout=2) as conn:
                row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
        except psycopg.Error:
            return False
        return row is not None and not row[0]


@dataclass(kw_only=True)
class ReplicatedPair(PostgresServers):
    primary: PostgresNode
    standby: PostgresNode
    synchronous: bool

    @property
    def url(self) -> str:
        """Both hosts, the writable one wanted: how a replica is deployed."""
        first, second = self.primary, self.standby
        return (
            f"host=127.0.0.1,127.0.0.1 port={first.port},{second.port} dbname={DATABASE}"
            " user=postgres target_session_attrs=read-write connect_timeout=2"
        )

    def wait_caught_up(self) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        with psycopg.connect(self.primary.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        assert row is not None
        deadline = time.monotonic() + DEADLINE_SECONDS
        with psycopg.connect(self.standby.url, autocommit=True) as conn:
            while time.monotonic() < deadline:
                done = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [row[0]]
                ).fetchone()
                if done is not None and done[0]:
                    return
                time.sleep(0.05)
        raise TimeoutError("the standby did not catch up")


@dataclass(kw_only=True)
class ArchivedPrimary(PostgresServers):
    primary: PostgresNode
    archive: Path
    restored: list[PostgresNode] = field(default_factory=list)

    def base_backup(self, into: Path) -> None:
        """`pg_basebackup` of the running primary, plain format, with the WAL it needs."""
        _run(
            _bin("pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.primary.port),
            "-U",
            "postgres",
            "-D",
            str(into),
            "-X",
            "stream",
            "--checkpoint=fast",
        )

    def archive_current_wal(self) -> None:
        """Close the primary's current WAL segment and wait until the archiver has copied it."""
        with psycopg.connect(self.primary.url, autocommit=True) as conn:
            row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
        assert row is not None
        wanted = self.archive / str(row[0])
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not wanted.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{wanted.name} was not archived")
            time.sleep(0.05)

    def restore(self, backup: Path, node: PostgresNode, *, settings: dict[str, str]) -> None:
        """A copy of `backup` as `node`'s data directory, started in targeted recovery: it
        replays the archive through `restore_command` up to the target `settings` name
        (`recovery_target_name`, `recovery_target_time`, …)."""
        _run("cp", "-a", str(backup), str(node.pgdata))
        lines = [f"restore_command = 'cp {self.archive}/%f %p'"]
        lines += [f"{name} = '{value}'" for name, value in settings.items()]
        with (node.pgdata / "postgresql.auto.conf").open("a") as conf:
            conf.write("".join(f"{line}\n" for line in lines))
        _run("touch", str(node.pgdata / "recovery.signal"))
        self.restored.append(node)
        self.start(node)


def _scratch_home(prefix: str) -> Path:
    ensure_server_user()
    home = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_dir()))
    home.chmod(0o755)
    if os.geteuid() == 0:
        shutil.chown(home, user=SERVER_USER)
    return home


def _init_primary(servers: PostgresServers, primary: PostgresNode, *settings: str) -> None:
    """`initdb`, `settings` appended to its postgresql.conf, started, database `nachtwacht`."""
    _run(
        _bin("initdb"),
        "-D",
        str(primary.pgdata),
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--locale=C",
    )
    with (primary.pgdata / "postgresql.conf").open("a") as conf:
        conf.write("".join(f"{line}\n" for line in settings))
    servers.start(primary)
    with psycopg.connect(
        f"host=127.0.0.1 port={primary.port} dbname=postgres user=postgres", autocommit=True
    ) as conn:
        conn.execute(f"CREATE DATABASE {DATABASE}")


@contextlib.contextmanager
def archived_primary() -> Iterator[ArchivedPrimary]:
    """A primary with database `nachtwacht` archiving its WAL into a directory of its own; it
    and every node started through it are stopped afterwards."""
    home = _scratch_home("nachtwacht-test-archive-")
    archive = home / "archive"
    _run("mkdir", str(archive))
    primary = PostgresNode("primary", home / "primary", _free_port())
    servers = ArchivedPrimary(home=home, primary=primary, archive=archive)
    try:
        _init_primary(
            servers,
            primary,
            "archive_mode = on",
            # Never overwrites: a restored server archiving its new timeline into the same
            # directory must not replace a segment of the old one.
            f"archive_command = 'test ! -f {archive}/%f && cp %p {archive}/%f'",
        )
        yield servers
    finally:
        for node in [*servers.restored, primary]:
            servers.stop(node)
        shutil.rmtree(home, ignore_errors=True)


@contextlib.contextmanager
def replicated_pair(*, synchronous: bool = False) -> Iterator[ReplicatedPair]:
    """A primary with database `nachtwacht` and a streaming standby; both stopped afterwards."""
    home = _scratch_home("nachtwacht-test-failover-")
    primary = PostgresNode("primary", home / "primary", _free_port())
    standby = PostgresNode("standby", home / "standby", _free_port())
    pair = ReplicatedPair(primary=primary, standby=standby, home=home, synchronous=synchronous)
    try:
        _init_primary(pair, primary)
        _run(
            _bin("pg_basebackup"),
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            str(standby.pgdata),
            "-R",
            "-X",
            "stream",
            "--checkpoint=fast",
            f"--dbname=application_name={STANDBY_NAME}",
        )
        pair.start(standby)
        if synchronous:
            # After the base backup, so the standby's copy of the settings does not wait for a
            # standby of its own once promoted.
            with psycopg.connect(primary.url, autocommit=True) as conn:
                conn.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
                conn.execute("SELECT pg_reload_conf()")
        yield pair
    finally:
        for node in (standby, primary):
            pair.stop(node)
        shutil.rmtree(home, ignore_errors=True)
