"""Builds a `Daemon` on real files in a temporary state directory, against a fake control plane."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_daemon.connection.config_cache import ConfigCache
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.outbox import Outbox
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import DaemonState, StateStore
from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from agent_daemon.host.event_log import EventLog, parse_line
from agent_daemon.minute.daemon import Daemon
from agent_daemon.minute.trust_root_follow import TrustRootFollower
from ground.clock import Clock
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater

CREDENTIAL = "nwa_test_credential"


@dataclass
class Harness:
    state_dir: Path
    control_plane: FakeControlPlane
    updater: StubUpdater
    host_clock: Clock
    stop: threading.Event = field(default_factory=threading.Event)
    log_stream: io.StringIO = field(default_factory=io.StringIO)
    # The daemon follows the trust root (its file in the state directory), trusting these key
    # files' keys (key id → raw key) for version 1; None: it does not follow.
    trust_root_legacy_keys: dict[str, bytes] | None = None
    # The clock no one sets (`ServerClock`'s `elapsed`, in seconds); None: the host clock's own
    # reading, so a test that moves the host clock by hand never makes it jump.
    elapsed: Callable[[], float] | None = None

    def __post_init__(self) -> None:
        self.daemon = self.restart()

    def restart(self) -> Daemon:
        """A fresh daemon on the same state directory, as after a process restart."""
        host_clock = self.host_clock
        server_clock = ServerClock(
            host_clock, elapsed=self.elapsed or (lambda: host_clock.now().timestamp())
        )
        http = build_http_client(
            base_url="http://control.test",
            credential=CREDENTIAL,
            timeout_seconds=5,
            transport=self.control_plane.transport(),
        )
        # Its own attribute, so a test can observe the lines (an `Activity`, say).
        self.log = EventLog(now=server_clock.now, stream=self.log_stream)
        control = ControlPlaneClient(http=http, server_clock=server_clock)
        follower = None
        if self.trust_root_legacy_keys is not None:
            follower = TrustRootFollower(
                control=control,
                held_file=HeldTrustRootFile(self.state_dir / "trust_root.json"),
                legacy_release_keys=self.trust_root_legacy_keys,
                log=self.log,
                expiry_now=server_clock.expiry_clock().now,
            )
        self.daemon = Daemon(
            control=control,
            updater=self.updater,
            state_store=self.store,
            config_cache=ConfigCache(self.state_dir / "config-cache.json"),
            outbox=self.outbox,
            server_clock=server_clock,
            log=self.log,
            stop_requested=self.stop.is_set,
            trust_roots=follower,
        )
        self.daemon.start()
        return self.daemon

    @property
    def store(self) -> StateStore:
        return StateStore(self.state_dir / "daemon-state.json")

    @property
    def outbox(self) -> Outbox:
        return Outbox(self.state_dir / "outbox")

    def state(self) -> DaemonState:
        return self.store.load()

    def events(self) -> list[dict[str, Any]]:
        return [parse_line(line) for line in self.log_stream.getvalue().splitlines()]

    def event_names(self) -> list[str]:
        return [event["event"] for event in self.events()]
