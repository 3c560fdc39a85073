"""A database host that vanishes without a word holds no request for the kernel's 15 minutes.

The probe runs in a network namespace of its own, so taking its loopback down drops every packet
between the pool and its PostgreSQL (no reset, as when a host is powered off) and nothing else on
the machine notices.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import psycopg
import pytest

from control_plane.database_fence import CONNECTION_DEFAULTS, DatabaseFence

pytestmark = pytest.mark.slow


def _namespaces_allowed() -> bool:
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], check=False).returncode == 0


@pytest.mark.skipif(not _namespaces_allowed(), reason="needs `unshare -n` and `ip` (root)")
def test_a_statement_sent_to_a_vanished_host_fails_instead_of_waiting_for_the_kernel() -> None:
    probe = subprocess.run(
        ["unshare", "-n", sys.executable, "-m", "tests.control_plane.vanished_host_probe"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr
    ended = json.loads(probe.stdout.strip().splitlines()[-1])
    print(f"statement to a vanished host: {ended}")
    assert ended["outcome"] == "error", ended
    assert "OperationalError" in ended["error"]
    # Ended by the product's bound, with room for a loaded machine (not a speed expectation: the
    # alternative is the kernel's quarter of an hour).
    assert ended["seconds"] < 4 * int(CONNECTION_DEFAULTS["tcp_user_timeout"]) / 1000


@pytest.fixture
def unanswered_port() -> Iterator[int]:
    """A listener whose queue is full and never accepted from: the kernel drops every further
    SYN, as a host that is gone does (a closed port would answer with a reset)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(3):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        try:
            yield port
        finally:
            for filler in fillers:
                filler.close()


def test_a_host_that_does_not_answer_a_connection_is_given_up_after_its_timeout(
    unanswered_port: int,
) -> None:
    fence = DatabaseFence(f"host=127.0.0.1 port={unanswered_port} dbname=nachtwacht user=x")
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="timeout"):
        fence.connect()
    waited = time.monotonic() - started
    print(f"connection to a host that does not answer given up after {waited:.1f} s")
    # The product's bound with room for a loaded machine; the alternative is the SYN retries'
    # two minutes.
    assert waited < 4 * int(CONNECTION_DEFAULTS["connect_timeout"])


def test_the_urls_own_connection_values_win() -> None:
    conninfo = DatabaseFence("host=db-a port=5432 dbname=n tcp_user_timeout=60000").conninfo()
    assert "tcp_user_timeout=60000" in conninfo
    assert "keepalives_idle=10" in conninfo
