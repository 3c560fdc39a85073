"""A host's own forward proxy (Debian's tinyproxy) breaks the way to the control plane for a whole
window, end to end: a real daemon configured with `--proxy`, a real `serve` and its reconcile
worker on the embedded PostgreSQL.

The proxy denies the control plane's host (its 403 "Filtered" page), or cannot reach what it
forwards to (its 502). Each time the agent notes the slot — never as a refused credential —,
`agent status` names it with the proxy's own answer, the proxy and what to check, and once the
proxy is right again the miss reads `unreachable` with that error instead of `offline`. (A proxy
that is down is a connection refused, as in `test_unreachable`; its message names the proxy:
`connection/test_proxy_route`.)
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.agent_daemon.daemon_support.night import Night, NightClock, local
from tests.agent_daemon.end_to_end.test_unreachable import SLOT, miss_event, slot_runs
from tests.agent_daemon.network_support.tinyproxy import TinyProxy, tinyproxy_path

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _tinyproxy_installed() -> None:
    if tinyproxy_path() is None:
        if os.environ.get("CI"):
            pytest.fail("tinyproxy is missing in CI: install Debian's `tinyproxy` package")
        pytest.skip("needs Debian's tinyproxy (bin/test installs it as root)")


@pytest.fixture
def night(tmp_path: Path, control_plane_server: Callable[..., Any]) -> Iterator[Night]:
    clock = NightClock.held(local("2026-11-30T02:40"), begins=tmp_path / "clock", speed=60.0)
    scenario = Night(root=tmp_path / "night", clock=clock, start_control_plane=control_plane_server)
    yield scenario
    scenario.close()


@pytest.fixture
def proxy() -> Iterator[TinyProxy]:
    started = TinyProxy()
    started.start()
    yield started
    started.close()


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port: int = probe.getsockname()[1]
        return port


def _filtered(proxy: TinyProxy) -> None:
    proxy.start(deny=(r"^127\.0\.0\.1$",))


def _no_upstream(proxy: TinyProxy) -> None:
    proxy.start(upstream=f"127.0.0.1:{_closed_port()}")


@pytest.mark.parametrize(
    ("breakage", "said"),
    [
        (_filtered, "403 Filtered (an HTML page) through the proxy"),
        (_no_upstream, "502 Unable to connect to upstream proxy (an HTML page) through the proxy"),
    ],
    ids=["filtered", "upstream-unreachable"],
)
def test_a_window_the_hosts_proxy_breaks_reads_unreachable_with_the_proxys_answer(
    night: Night,
    proxy: TinyProxy,
    breakage: Callable[[TinyProxy], None],
    said: str,
) -> None:
    night.publish("1.5.0", 42)
    host = night.add_host("web-01", enroll_args=("--proxy", proxy.url))
    daemon = host.start()
    synced = daemon.wait_for("config.synced")
    breakage(proxy)
    assert night.clock.now() < local("2026-11-30T02:59"), f"broken too late: {synced}"
    try:
        tried = daemon.wait_for("slot.unreachable", slot_key=SLOT)
        assert f"GET /v1/agent/config: {said} {proxy.url} (agent.toml proxy)" in tried["error"]
        assert not daemon.named("credential.refused")
        status = host.agent.status(env={"NACHTWACHT_FAKE_CLOCK": night.clock.setting})
        assert status.returncode == 0, status.stderr
        [line] = [line for line in status.stdout.splitlines() if "in its window" in line]
        assert line.startswith("  ! 2026-11-30 03:00 CET: the agent was running but could not")
        assert f"{tried['error']} — check this host's proxy, firewall and DNS" in line
        while not slot_runs(night, host):
            assert night.clock.now() < local("2026-11-30T03:40"), "no pass recorded the slot"
            night.clock.wait_until(night.clock.now() + timedelta(minutes=1))
        assert slot_runs(night, host) == [("missed", "offline", None)]
    finally:
        proxy.start()
    daemon.wait_for("report.delivered", slot_key=SLOT)

    # The control plane keeps the agent's words: the proxy's own answer, and the proxy.
    assert slot_runs(night, host) == [("missed", "unreachable", tried["error"])]
    assert miss_event(night, host)["unreachable_error"] == tried["error"]
