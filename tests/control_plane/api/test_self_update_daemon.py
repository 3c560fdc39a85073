"""End to end: daemons built as `agent run` builds them (`build_daemon`) are offered an updater
release by a real control plane over loopback HTTP and take it through the caps: two agents of
one organisation with an organisation cap of 1 — one self-updates in the round, the other waits
for the next one. The self-update ends at the host's mechanism (`SelfInstall`), given here as a
recorder of what it is handed: the verified bundle's path and version (the host's own mechanism
and the reports of the switch's outcome: tests/agent_daemon/self_update/test_self_update_e2e.py).

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

import base64
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.commands.run_cli import DaemonParts, build_daemon
from agent_daemon.self_update.pending_switch import SwitchRun
from agent_daemon.settings import AgentSettings
from agent_daemon.updater.trusted_keys import TrustedKeys
from agent_daemon.updater.updater_settings import UpdaterSettings
from control_plane.types import Pool
from signed_release.keys import key_id
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release
from tests.worlds.clocks import ManualClock

BUNDLE = b"nachtwacht-agent-bundle-2.1.0-linux-x86_64.tar.gz bytes " * 200


def _publish(api: Api, operator_key: str, release: SignedRelease) -> None:
    with api.client(operator_key) as client:
        answer = client.post(
            "/v1/admin/releases",
            json={
                "manifest_b64": base64.b64encode(release.manifest).decode(),
                "signature_b64": base64.b64encode(release.signature).decode(),
                "artifact_b64": base64.b64encode(release.artifact).decode(),
            },
        )
    assert answer.status_code == 201, answer.text


class Installed:
    """The host's mechanism as the seam sees it: what it was handed, and the bytes at the path."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.switches: list[tuple[str, str]] = []
        self.restarts = 0

    def install(self, bundle: Path, version: str, unpacked_size: int) -> None:
        self.calls.append((version, bundle.read_bytes()))

    def switch(self, version: str, run: SwitchRun) -> None:
        self.switches.append((version, run.run_id))

    def restart(self) -> None:
        self.restarts += 1


def _daemon(
    api: Api,
    agent: Agent,
    root: Path,
    clock: ManualClock,
    key: Ed25519PrivateKey,
    install: Installed,
) -> DaemonParts:
    state_dir = root / "state"
    state_dir.mkdir(parents=True)
    (root / "install").mkdir()
    settings = AgentSettings(
        config_file=root / "agent.toml",
        state_dir=state_dir,
        control_url=api.base_url,
        credential=agent.agent_key,
        agent_id=agent.agent_id,
        updater=UpdaterSettings(
            install_root=root / "install",
            state_dir=state_dir / "updater",
            trusted_keys=TrustedKeys.of({key_id(key.public_key()): key.public_key()}),
            platform="linux-x86_64",
            channel="stable",
            health_command=("true",),
        ),
    )
    return build_daemon(
        settings,
        clock=clock,
        stop=threading.Event(),
        self_install=install,
        updater_version="2.0.0",
    )


def test_two_daemons_of_one_org_take_an_updater_release_one_per_round_under_cap_1(
    api: Api,
    pool: Pool,
    clock: ManualClock,
    operator_key: str,
    release_key: Ed25519PrivateKey,
    published: SignedRelease,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    tmp_path: Path,
) -> None:
    _publish(
        api,
        operator_key,
        sign_release(
            release_key, version="2.1.0", manifest_version=50, artifact=BUNDLE, product="updater"
        ),
    )
    with api.client(operator_key) as client:
        assert client.put("/v1/admin/settings", json={"org_cap": 1}).status_code == 200
    org = make_org()
    first, second = make_agent(org, "web-01"), make_agent(org, "web-02")
    installed_first, installed_second = Installed(), Installed()
    daemon_first = _daemon(api, first, tmp_path / "a", clock, release_key, installed_first)
    daemon_second = _daemon(api, second, tmp_path / "b", clock, release_key, installed_second)

    clock.set(datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC))
    assert daemon_first.daemon.tick() == "dispatched"
    # The same round, the organisation's one token taken: the other waits, its slot kept.
    assert daemon_second.daemon.tick() == "throttled"
    assert installed_first.calls == [("2.1.0", BUNDLE)]
    assert installed_second.calls == []

    clock.advance(minutes=1)
    assert daemon_second.daemon.tick() == "dispatched"
    assert installed_second.calls == [("2.1.0", BUNDLE)]

    with pool.connection() as conn:
        runs = conn.execute(
            "SELECT a.name, r.status, r.version, r.from_version, rel.product"
            " FROM runs r JOIN agents a ON a.id = r.agent_id"
            " JOIN releases rel ON rel.id = r.release_id ORDER BY a.name"
        ).fetchall()
        agents = conn.execute(
            "SELECT a.name, uv.version, a.current_version FROM agents a"
            " LEFT JOIN agent_updater_versions uv ON uv.agent_id = a.id ORDER BY a.name"
        ).fetchall()
    # Switched, not yet reported: the new build reports once it checks in (or the old one,
    # restored by the guard, reports the rollback).
    assert [tuple(run.values()) for run in runs] == [
        ("web-01", "claimed", None, "2.0.0", "updater"),
        ("web-02", "claimed", None, "2.0.0", "updater"),
    ]
    assert [len(i.switches) for i in (installed_first, installed_second)] == [1, 1]
    assert (installed_first.restarts, installed_second.restarts) == (1, 1)
    # The managed agent's version is its own; each host's updater version is still the old one.
    assert [tuple(agent.values()) for agent in agents] == [
        ("web-01", "2.0.0", None),
        ("web-02", "2.0.0", None),
    ]
    for parts in (daemon_first, daemon_second):
        parts.http.close()
        parts.download_http.close()
