"""The name lookup is the one part of a request the watchdog cannot bound (`connection/deadline`):
the system's resolver times it. Measured here for real, in a network and mount namespace the test
creates (`unshare`): name servers on loopback that never answer, a `resolv.conf` of the test's own
bind-mounted over `/etc/resolv.conf`, and the agent's own client polling its control plane by
name. The poll ends offline after `timeout` x `attempts` x name servers — the bound
docs/agent_daemon.md states — not a multiple of it (no retry of the agent's, the A and AAAA
queries asked together), with the resolver's words."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.agent_daemon.limited_child import NEW_NAMESPACES, needs_new_namespaces, run_script

pytestmark = pytest.mark.slow

_SCRIPT = """
import json, socket, subprocess, sys, threading, time
from pathlib import Path

conf, servers = Path(sys.argv[1]), sys.argv[2:]
subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
asked = []
for address in servers:
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent.bind((address, 53))
    def hear(sock=silent):
        while True:
            sock.recvfrom(4096)
            asked.append(sock.getsockname()[0])
    threading.Thread(target=hear, daemon=True).start()
subprocess.run(["mount", "--bind", str(conf), "/etc/resolv.conf"], check=True)

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import ControlPlaneUnreachable
from ground.clock import SystemClock

http = build_http_client(
    base_url="https://control.nachtwacht.test", credential="nwa_0123456789abcdef",
    timeout_seconds=30, host_id=None, environ={},
)
client = ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))
began = time.monotonic()
try:
    client.fetch_config(etag=None)
    error = None
except ControlPlaneUnreachable as exc:
    error = str(exc)
print(json.dumps({"seconds": time.monotonic() - began, "error": error, "asked": len(asked)}))
"""


def _in_namespace(tmp_path: Path, resolv_conf: str, servers: list[str]) -> dict[str, object]:
    needs_new_namespaces()
    conf = tmp_path / "resolv.conf"
    conf.write_text(resolv_conf, encoding="ascii")
    return run_script(_SCRIPT, str(conf), *servers, inside=NEW_NAMESPACES)


def test_a_silent_name_server_holds_a_poll_timeout_times_attempts_times_servers(
    tmp_path: Path,
) -> None:
    servers = ["127.0.0.1", "127.0.0.2"]
    found = _in_namespace(
        tmp_path,
        "".join(f"nameserver {s}\n" for s in servers) + "options timeout:1 attempts:2\n",
        servers,
    )
    bound = 1 * 2 * len(servers)
    seconds = found["seconds"]
    assert isinstance(seconds, float)
    assert bound - 0.5 <= seconds <= bound + 2.0, found
    error = str(found["error"])
    assert error.startswith("GET /v1/agent/config: cannot connect"), error
    assert "name resolution" in error, error
    # Each server asked once per attempt, A and AAAA together: nothing of the agent's own
    # multiplies the resolver's bound.
    assert found["asked"] == 2 * 2 * len(servers)


def test_the_resolver_asks_at_most_three_name_servers(tmp_path: Path) -> None:
    """glibc's MAXNS: a fourth name server in resolv.conf is never asked, so the bound is
    `timeout` x `attempts` x at most three servers."""
    servers = ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"]
    found = _in_namespace(
        tmp_path,
        "".join(f"nameserver {s}\n" for s in servers) + "options timeout:1 attempts:1\n",
        servers,
    )
    seconds = found["seconds"]
    assert isinstance(seconds, float)
    assert 2.5 <= seconds <= 5.0, found
    assert found["asked"] == 2 * 3
