"""A database a `nachtwacht control …` command cannot reach is said in one line an operator can
act on at 03:10: "cannot connect to the database at HOST:PORT (NAME): <reason> — <what to
check>", whichever command it is, whichever way the URL was given, and never its password.
Real processes, real sockets on loopback, the tests' real PostgreSQL; nothing is made anywhere."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator

import pytest

from control_plane.database import database_url_with_name
from tests.control_plane.test_cli import run_control

PASSWORD = "s3cret-Pw_never-shown"

# Every kind of command: one that migrates, one that serves, the admin commands' pool, and
# finishing a restore.
COMMANDS = [
    pytest.param(["create-org", "Acme"], id="create_org"),
    pytest.param(["migrate"], id="migrate"),
    pytest.param(["migrate", "--check"], id="migrate_check"),
    pytest.param(["serve", "--port", "0"], id="serve"),
    pytest.param(["serve", "--port", "0", "--no-migrate"], id="serve_no_migrate"),
    pytest.param(["after-restore"], id="after_restore"),
    pytest.param(["events"], id="events"),
]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port held bound and never listened on: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _the_line(done: subprocess.CompletedProcess[str], command: str) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    assert PASSWORD not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"nachtwacht control {command}: "), lines[0]
    return lines[0].removeprefix(f"nachtwacht control {command}: ")


@pytest.mark.parametrize("arguments", COMMANDS)
def test_a_refused_connection_names_the_address_the_database_and_what_to_check(
    closed_port: int, arguments: list[str]
) -> None:
    url = f"postgresql://nachtwacht:{PASSWORD}@127.0.0.1:{closed_port}/nachtwacht"
    done = run_control(*arguments, "--database-url", url)
    line = _the_line(done, arguments[0])
    assert line.startswith(
        f"cannot connect to the database at 127.0.0.1:{closed_port} (nachtwacht): "
        "connection refused"
    ), line
    assert "check that PostgreSQL runs on that host and listens on that port" in line, line


def test_a_url_from_the_environment_is_said_alike(closed_port: int) -> None:
    url = f"host=127.0.0.1 port={closed_port} dbname=fleet user=x password={PASSWORD}"
    done = run_control("create-org", "Acme", env={"NACHTWACHT_DATABASE_URL": url})
    line = _the_line(done, "create-org")
    assert line.startswith(
        f"cannot connect to the database at 127.0.0.1:{closed_port} (fleet): connection refused"
    ), line


def test_several_hosts_are_each_named(closed_port: int) -> None:
    url = (
        f"host=127.0.0.1,localhost port={closed_port},{closed_port} dbname=fleet user=x "
        f"password={PASSWORD}"
    )
    done = run_control("create-org", "Acme", "--database-url", url)
    line = _the_line(done, "create-org")
    assert line.startswith(
        f"cannot connect to the database at 127.0.0.1:{closed_port},localhost:{closed_port} "
        "(fleet): "
    ), line


def test_a_host_name_that_does_not_resolve_says_so() -> None:
    url = f"postgresql://nachtwacht:{PASSWORD}@no-such-host.invalid:5433/nachtwacht"
    done = run_control("create-org", "Acme", "--database-url", url)
    line = _the_line(done, "create-org")
    assert line.startswith(
        "cannot connect to the database at no-such-host.invalid:5433 (nachtwacht): "
    ), line
    assert "check the host's name" in line, line


def test_a_server_that_never_answers_is_given_up_on_in_seconds() -> None:
    """A port that takes the connection and never speaks (a wrong service, a stuck proxy)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        url = f"postgresql://nachtwacht:{PASSWORD}@127.0.0.1:{port}/nachtwacht?connect_timeout=2"
        done = run_control("create-org", "Acme", "--database-url", url)
    line = _the_line(done, "create-org")
    assert line.startswith(f"cannot connect to the database at 127.0.0.1:{port} (nachtwacht): ")
    assert "no answer" in line, line


def test_a_database_that_does_not_exist_on_a_running_server_is_named(
    postgres_admin_url: str,
) -> None:
    url = database_url_with_name(postgres_admin_url, "no_such_fleet")
    done = run_control("create-org", "Acme", "--database-url", url)
    line = _the_line(done, "create-org")
    assert "(no_such_fleet): " in line, line
    assert 'database "no_such_fleet" does not exist' in line, line
    assert "check the URL's database name" in line, line


@pytest.mark.parametrize(
    ("said", "reason", "check"),
    [
        pytest.param(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'password authentication failed for user "nachtwacht"',
            'password authentication failed for user "nachtwacht"',
            "check the URL's user and password",
            id="password",
        ),
        pytest.param(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'role "nachtwacht" does not exist',
            'role "nachtwacht" does not exist',
            "check the URL's user",
            id="role",
        ),
        pytest.param(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'database "role_db" does not exist',
            'database "role_db" does not exist',
            "check the URL's database name, or create the database",
            id="database_named_like_a_role",
        ),
        pytest.param(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: FATAL:  '
            'no pg_hba.conf entry for host "10.0.0.9", user "nachtwacht", database "fleet"',
            'no pg_hba.conf entry for host "10.0.0.9", user "nachtwacht", database "fleet"',
            "check that the server's pg_hba.conf lets this host, user and database in",
            id="pg_hba",
        ),
        pytest.param(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: SSL error: '
            "certificate verify failed",
            "SSL error: certificate verify failed",
            "check the server's certificate and the URL's sslmode, sslrootcert",
            id="certificate",
        ),
        pytest.param(
            'connection failed: connection to server at "10.0.0.5", port 5432 failed: Network is '
            "unreachable",
            "network is unreachable",
            "check the network's route to that host",
            id="no_route",
        ),
        pytest.param(
            f"connection failed: something new that quotes {PASSWORD}\n\tand a second line",
            "something new that quotes ***",
            "check the URL's host, port, database, user and password, and that PostgreSQL runs",
            id="unknown_reason_quoting_the_password",
        ),
    ],
)
def test_what_a_server_refuses_is_said_with_what_to_check(
    said: str, reason: str, check: str
) -> None:
    """One seam: libpq's words for a server that answers and refuses (no server here takes a
    password), as `unreachable` words them."""
    import psycopg

    from control_plane.database_reach import unreachable

    url = f"postgresql://nachtwacht:{PASSWORD}@10.0.0.5/fleet"
    line = str(unreachable(url, psycopg.OperationalError(said)))
    assert line.startswith(f"cannot connect to the database at 10.0.0.5:5432 (fleet): {reason} — ")
    assert check in line, line
    assert PASSWORD not in line and "\n" not in line
