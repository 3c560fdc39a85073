"""The daemon follows the trust root the config announces: each version fetched over real HTTP on
loopback, verified by the one held before it, stored before the next; a refused root is one
warning and the held root stays. Named after what each case stops."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from agent_daemon.errors import BadServerAnswer
from agent_daemon.host.event_log import EventLog, parse_line
from agent_daemon.minute.trust_root_follow import TrustRootFollower
from ground.contract import TRUST_ROOT_VERSION_HEADER, TRUST_ROOTS_PATH, trust_root_path
from signed_release.keys import key_id
from signed_release.trust_root import MAX_ROOT_BYTES, MAX_ROOT_STEPS
from tests.agent_daemon.daemon_support.fake_control_plane import FakeControlPlane
from tests.agent_daemon.daemon_support.harness import Harness
from tests.agent_daemon.daemon_support.stub_updater import StubUpdater
from tests.agent_daemon.minute.slot_world import SLOT_AT
from tests.agent_daemon.scripted_server import ScriptedServer, scripted_server
from tests.agent_daemon.trust_roots.chain import RootChain, release_key_id
from tests.agent_daemon.trust_roots.root_server import RootServer, root_server
from tests.worlds.clocks import ManualClock
from tests.worlds.processes import REPO_ROOT

NOW = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[RootServer]:
    with root_server(FakeControlPlane(now=lambda: NOW).config()) as served:
        yield served


class Follower:
    """A follower on a real client to `server`, its held root in `tmp_path`, its lines kept."""

    def __init__(self, server: RootServer, state_dir: Path, *, legacy: dict[str, bytes]) -> None:
        clock = ServerClock(ManualClock(NOW))
        self.stream = io.StringIO()
        self.held = HeldTrustRootFile(state_dir / "trust_root.json")
        self.http = build_http_client(
            base_url=server.base_url, credential="nwa_test_credential", timeout_seconds=5
        )
        self.control = ControlPlaneClient(http=self.http, server_clock=clock)
        self.follower = TrustRootFollower(
            control=self.control,
            held_file=self.held,
            legacy_release_keys=legacy,
            log=EventLog(now=clock.now, stream=self.stream),
            expiry_now=clock.now,
        )

    def events(self, name: str) -> list[dict[str, Any]]:
        lines = [parse_line(line) for line in self.stream.getvalue().splitlines()]
        return [line for line in lines if line["event"] == name]

    def held_version(self) -> int | None:
        loaded = self.held.load()
        return None if loaded is None else loaded.version


def _raw(key: Ed25519PrivateKey) -> dict[str, bytes]:
    public = key.public_key().public_bytes_raw()
    return {key_id(key.public_key()): public}


def _holding(chain: RootChain, tmp_path: Path, server: RootServer, version: int = 1) -> Follower:
    follower = Follower(server, tmp_path, legacy={})
    follower.held.save(chain.versions[version])
    return follower


def test_an_agent_holding_v1_reaches_v5_in_one_poll_storing_each_step(
    server: RootServer, tmp_path: Path
) -> None:
    chain = RootChain()
    new_key = Ed25519PrivateKey.generate()
    chain.extend_to(4)
    chain.next(release_keys=[new_key])
    server.roots.update(chain.versions)
    follower = _holding(chain, tmp_path, server)

    follower.follower.follow(5)

    assert follower.held_version() == 5
    assert follower.held.path.read_bytes() == chain.versions[5]
    assert [event["version"] for event in follower.events("trust_root.updated")] == [2, 3, 4, 5]
    assert follower.held.load().release_keys == _raw(new_key)  # type: ignore[union-attr]
    fetched = [path for path in server.paths() if path.startswith(TRUST_ROOTS_PATH)]
    assert fetched == [trust_root_path(v) for v in (2, 3, 4, 5)]
    assert follower.follower.held_version() == 5


def test_a_root_announced_but_not_served_stops_the_walk_quietly(
    server: RootServer, tmp_path: Path
) -> None:
    chain = RootChain()
    chain.extend_to(2)
    server.roots[2] = chain.versions[2]
    follower = _holding(chain, tmp_path, server)
    follower.follower.follow(4)
    assert follower.held_version() == 2
    assert follower.events("trust_root.refused") == []


def test_a_crash_mid_walk_keeps_every_verified_step(server: RootServer, tmp_path: Path) -> None:
    chain = RootChain()
    chain.extend_to(4)
    server.roots.update(chain.versions)
    server.failing[4] = 503
    follower = _holding(chain, tmp_path, server)
    follower.follower.follow(4)
    # v2 and v3 were stored as they were verified; v4 was not reachable.
    assert follower.held_version() == 3
    [unavailable] = follower.events("trust_root.unavailable")
    assert unavailable["version"] == 4 and unavailable["level"] == "warning"
    del server.failing[4]
    follower.follower.follow(4)
    assert follower.held_version() == 4


@pytest.mark.parametrize(
    "attack",
    [
        pytest.param("below_threshold", id="new_root_signed_by_one_old_root_key"),
        pytest.param("garbage", id="not_a_root"),
        pytest.param("skipped_version", id="v3_served_as_v2"),
    ],
)
def test_a_refused_root_is_one_warning_and_the_held_root_stays(
    server: RootServer, tmp_path: Path, attack: str
) -> None:
    chain = RootChain()
    if attack == "below_threshold":
        bad = chain.next(signers=chain.root_keys[:1])
    elif attack == "garbage":
        bad = b'{"signed": "nonsense"}'
    else:
        chain.extend_to(3)
        bad = chain.versions[3]
    server.roots[1] = chain.versions[1]
    server.roots[2] = bad
    follower = _holding(chain, tmp_path, server)
    for _ in range(3):
        follower.follower.follow(2)
    assert follower.held_version() == 1
    assert follower.held.path.read_bytes() == chain.versions[1]
    [refused] = follower.events("trust_root.refused")
    assert refused["level"] == "warning"
    assert refused["version"] == 2 and refused["held"] == 1
    assert "trust root" in refused["error"]
    assert "Traceback" not in follower.stream.getvalue()


def test_an_older_or_equal_announced_version_fetches_nothing(
    server: RootServer, tmp_path: Path
) -> None:
    chain = RootChain()
    chain.extend_to(3)
    follower = _holding(chain, tmp_path, server, version=3)
    follower.follower.follow(2)
    follower.follower.follow(3)
    assert server.requests == []
    assert follower.held_version() == 3


def test_one_poll_takes_at_most_the_step_bound(server: RootServer, tmp_path: Path) -> None:
    chain = RootChain()
    chain.extend_to(MAX_ROOT_STEPS + 3)
    server.roots.update(chain.versions)
    follower = _holding(chain, tmp_path, server)
    follower.follower.follow(chain.newest)
    assert follower.held_version() == 1 + MAX_ROOT_STEPS
    follower.follower.follow(chain.newest)
    assert follower.held_version() == chain.newest


def test_an_agent_on_key_files_migrates_to_v1_signed_by_its_release_key(
    server: RootServer, tmp_path: Path
) -> None:
    legacy = Ed25519PrivateKey.generate()
    chain = RootChain(migration_key=legacy)
    chain.extend_to(2)
    server.roots.update(chain.versions)
    follower = Follower(server, tmp_path, legacy=_raw(legacy))
    assert follower.follower.held_version() is None
    follower.follower.follow(2)
    assert follower.held_version() == 2
    assert set(follower.held.load().release_keys) == {release_key_id(chain.release_key)}  # type: ignore[union-attr]


def test_an_agent_on_key_files_refuses_a_v1_its_release_key_did_not_sign(
    server: RootServer, tmp_path: Path
) -> None:
    legacy = Ed25519PrivateKey.generate()
    chain = RootChain()  # root keys only: anyone could have made it
    server.roots.update(chain.versions)
    follower = Follower(server, tmp_path, legacy=_raw(legacy))
    follower.follower.follow(1)
    assert follower.held.load() is None
    [refused] = follower.events("trust_root.refused")
    assert "not signed by any release key this host trusts" in refused["error"]


def test_an_agent_on_key_files_does_not_start_past_v1(server: RootServer, tmp_path: Path) -> None:
    legacy = Ed25519PrivateKey.generate()
    chain = RootChain(migration_key=legacy)
    chain.extend_to(2)
    # v1 is missing from the server; v2 (signed by the root keys only) must not be the start.
    server.roots[2] = chain.versions[2]
    follower = Follower(server, tmp_path, legacy=_raw(legacy))
    follower.follower.follow(2)
    assert follower.held.load() is None
    assert server.paths() == [trust_root_path(1)]


def test_an_expired_newest_root_is_kept_and_said_once(server: RootServer, tmp_path: Path) -> None:
    chain = RootChain()
    chain.next(expires=datetime(2026, 11, 1, tzinfo=UTC))
    server.roots.update(chain.versions)
    follower = _holding(chain, tmp_path, server)
    follower.follower.follow(2)
    follower.follower.follow(2)
    assert follower.held_version() == 2
    [expired] = follower.events("trust_root.expired")
    assert expired["version"] == 2 and expired["level"] == "warning"


def test_every_config_poll_tells_the_version_held(server: RootServer, tmp_path: Path) -> None:
    chain = RootChain()
    follower = Follower(server, tmp_path, legacy={})
    follower.control.fetch_config(etag=None, trust_root_version=None)
    follower.held.save(chain.versions[1])
    follower.control.fetch_config(etag=None, trust_root_version=3)
    sent = [
        {k.lower(): v for k, v in headers.items()}.get(TRUST_ROOT_VERSION_HEADER.lower())
        for _, headers in server.requests
    ]
    assert sent == [None, "3"]


def test_an_idle_follower_with_a_current_root_does_not_import_tuf(tmp_path: Path) -> None:
    chain = RootChain()
    held = HeldTrustRootFile(tmp_path / "trust_root.json")
    held.save(chain.versions[1])
    script = (
        "import json, sys\n"
        "from datetime import UTC, datetime\n"
        "from pathlib import Path\n"
        "from agent_daemon.commands.run_cli import build_daemon\n"
        "from agent_daemon.disk.held_trust_root import HeldTrustRootFile\n"
        "from agent_daemon.minute.trust_root_follow import TrustRootFollower\n"
        f"held = HeldTrustRootFile(Path({str(held.path)!r}))\n"
        "follower = TrustRootFollower(control=None, held_file=held, legacy_release_keys={},\n"
        "    log=None, expiry_now=lambda: datetime.now(UTC))\n"
        "version = follower.held_version()\n"
        "follower.follow(1)\n"
        "print(json.dumps([version, 'tuf' in sys.modules, 'cryptography' in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(result.stdout) == [1, False, False]


# -- in the daemon's minute ------------------------------------------------------------------------


def _daemon_holding(tmp_path: Path, chain: RootChain, **plane: object) -> tuple[Harness, Any]:
    clock = ManualClock(SLOT_AT)
    control_plane = FakeControlPlane(now=clock.now, **plane)  # type: ignore[arg-type]
    HeldTrustRootFile(tmp_path / "trust_root.json").save(chain.versions[1])
    harness = Harness(tmp_path, control_plane, StubUpdater(), clock, trust_root_legacy_keys={})
    return harness, clock


def test_a_refused_root_does_not_stop_the_minute(tmp_path: Path) -> None:
    chain = RootChain()
    forged = chain.next(signers=chain.root_keys[2:])
    harness, clock = _daemon_holding(tmp_path, chain, trust_roots={1: chain.versions[1], 2: forged})
    # The slot is still claimed and dispatched, with the root held before.
    assert harness.daemon.tick() == "dispatched"
    assert HeldTrustRootFile(tmp_path / "trust_root.json").load().version == 1  # type: ignore[union-attr]
    clock.advance(minutes=1)
    harness.daemon.tick()
    refused = [e for e in harness.events() if e["event"] == "trust_root.refused"]
    assert len(refused) == 1 and refused[0]["level"] == "warning"
    assert harness.control_plane.told_trust_roots == ["1", "1"]


def test_the_minute_follows_the_root_before_it_plans_and_tells_the_new_version(
    tmp_path: Path,
) -> None:
    chain = RootChain()
    chain.extend_to(3)
    harness, clock = _daemon_holding(tmp_path, chain, trust_roots=dict(chain.versions))
    assert harness.daemon.tick() == "dispatched"
    names = harness.event_names()
    assert names.index("trust_root.updated") < names.index("claim.granted")
    clock.advance(minutes=1)
    harness.daemon.tick()
    assert harness.control_plane.told_trust_roots == ["1", "3"]


def test_an_unusable_held_root_is_said_once_and_never_replaced_from_the_network(
    server: RootServer, tmp_path: Path
) -> None:
    chain = RootChain()
    chain.extend_to(2)
    server.roots.update(chain.versions)
    follower = _holding(chain, tmp_path, server)
    follower.held.path.chmod(0o666)  # someone else could have written it: trusted no more
    assert follower.follower.held_version() is None
    follower.follower.follow(2)
    follower.follower.follow(2)
    assert server.requests == []
    assert follower.held.path.read_bytes() == chain.versions[1]
    [unusable] = follower.events("trust_root.unusable")
    assert "not writable by group or others" in unusable["error"]


def test_a_root_file_put_back_to_an_older_version_is_walked_forward_again_and_said(
    server: RootServer, tmp_path: Path
) -> None:
    """A running daemon holds v3 (v2 retired the first release key); then its file goes back to
    v1 (a restored backup of the state directory, by its own user): the updater reads the file
    each time it verifies, so v1's retired key would be trusted again while the daemon still
    told the control plane it held v3. The next poll reads the file, says so, and walks forward
    again before anything is planned."""
    chain = RootChain()
    chain.next(release_keys=[Ed25519PrivateKey.generate()])
    chain.extend_to(3)
    server.roots.update(chain.versions)
    follower = _holding(chain, tmp_path, server)
    follower.follower.follow(3)
    assert follower.held_version() == 3
    follower.held.save(chain.versions[1])

    assert follower.follower.held_version() == 1
    follower.follower.follow(3)

    assert follower.held.path.read_bytes() == chain.versions[3]
    assert follower.follower.held_version() == 3
    [went_back] = follower.events("trust_root.went_back")
    assert went_back["level"] == "warning"
    assert (went_back["held"], went_back["on_disk"]) == (3, 1)
    assert [event["version"] for event in follower.events("trust_root.updated")] == [2, 3, 2, 3]
    assert "Traceback" not in follower.stream.getvalue()


class _BrokenControl:
    """A control plane client whose fetch fails in a way nobody planned for (one seam)."""

    def fetch_trust_root(self, version: int, *, max_bytes: int) -> bytes | None:
        raise RuntimeError(f"unexpected failure fetching v{version}")


def test_an_unexpected_failure_while_following_is_one_warning_not_a_lost_minute(
    tmp_path: Path,
) -> None:
    chain = RootChain()
    held = HeldTrustRootFile(tmp_path / "trust_root.json")
    held.save(chain.versions[1])
    stream = io.StringIO()
    follower = TrustRootFollower(
        control=_BrokenControl(),  # type: ignore[arg-type]
        held_file=held,
        legacy_release_keys={},
        log=EventLog(now=lambda: NOW, stream=stream),
        expiry_now=lambda: NOW,
    )
    follower.follow(2)
    follower.follow(2)
    lines = [parse_line(line) for line in stream.getvalue().splitlines()]
    assert [(line["event"], line["version"]) for line in lines] == [("trust_root.crashed", 2)]
    assert held.load().version == 1  # type: ignore[union-attr]


def test_a_root_answer_that_never_ends_is_refused_after_the_bound_not_read_to_its_end() -> None:
    sent: list[int] = []
    limit = 64 * 2**20

    def endless(connection: socket.socket, server: ScriptedServer) -> None:
        connection.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n%s\r\n" % (65536, b"{" * 65536)
        total = 0
        try:
            while total < limit:
                connection.sendall(chunk)
                total += 65536
        finally:
            sent.append(total)

    with scripted_server(endless) as server:
        http = build_http_client(
            base_url=server.origin, credential="nwa_test_credential", timeout_seconds=5
        )
        control = ControlPlaneClient(http=http, server_clock=ServerClock(ManualClock(NOW)))
        with pytest.raises(BadServerAnswer, match=f"runs past {MAX_ROOT_BYTES} bytes"):
            control.fetch_trust_root(2, max_bytes=MAX_ROOT_BYTES)
        http.close()
        deadline = time.monotonic() + 30  # for a failure only
        while not sent and time.monotonic() < deadline:
            time.sleep(0.05)
    # The client stopped reading at the bound: the server could not send it all.
    assert sent and sent[0] < limit
