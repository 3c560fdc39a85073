"""A daemon killed between its switch and saving the claim's end leaves the claim in its state file;
the build it switched to must never carry that claim on (it would take the release a second time,
or report it failed) — not even while the control plane is unreachable, when nothing can commit.

The daemon is built as `agent run` builds it (`build_daemon`), on real files: a real switch of a
real own root (conftest's builds), a state file holding the claim, a control plane nobody listens
on."""

from __future__ import annotations

import base64
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_daemon.commands.agent_parts import OUTBOX_DIR_NAME, STATE_FILE_NAME
from agent_daemon.commands.run_cli import build_daemon
from agent_daemon.connection.outbox import Outbox
from agent_daemon.disk.daemon_state import ClaimInProgress, DaemonState, StateStore
from agent_daemon.self_update.own_builds import RunningBuild
from agent_daemon.self_update.pending_switch import SelfUpdateCheckIn, SwitchRun, switch
from agent_daemon.settings import AgentSettings
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.trusted_keys import TrustedKeys
from agent_daemon.updater.updater_settings import UpdaterSettings
from tests.agent_daemon.self_update.own_build_kit import NEW, OLD, run_guard
from tests.agent_daemon.self_update.recorder import Recorder
from tests.worlds.clocks import ManualClock
from tests.worlds.releases import ReleaseFactory

RUN_ID = "0b6f1c9e-3f59-4b0c-8a51-1f7c0e6b9d22"
NOW = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)


def test_the_new_build_ends_the_claim_of_its_own_switch_even_offline(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=1))
    release = factory.sign(
        b"bundle" * 50, version=NEW, manifest_version=7, product="updater", unpacked_size=300
    )
    claim = ClaimInProgress(
        run_id=RUN_ID,
        trigger="schedule",
        slot_key="2026-11-30T03:00",
        release_version=NEW,
        manifest_b64=base64.b64encode(release.manifest_bytes).decode(),
        signature_b64=base64.b64encode(release.signature).decode(),
        artifact_url="http://127.0.0.1:9/v1/agent/releases/x/artifact",
        claimed_at=NOW - timedelta(minutes=2),
        phase="dispatching",
        attempts=1,
        window_closes_at=NOW + timedelta(minutes=12),
        token_expires_at=NOW + timedelta(minutes=12),
    )
    store = StateStore(state_dir / STATE_FILE_NAME)
    store.save(DaemonState(claim=claim))
    # The old daemon switched (its run kept beside the switch) and was killed right after.
    switch(
        own_root=layout.root,
        state_dir=state_dir,
        to_version=NEW,
        now=datetime.now(UTC),
        restart=lambda: None,
        run=SwitchRun(run_id=RUN_ID, to_version=NEW, switched_at=NOW - timedelta(minutes=1)),
    )
    assert layout.link_target("current") == NEW
    (tmp_path / "install").mkdir()
    settings = AgentSettings(
        config_file=tmp_path / "agent.toml",
        state_dir=state_dir,
        control_url="http://127.0.0.1:9",
        credential="nwa_0123456789abcdef",
        agent_id="4f0e8a4c-8c0e-4a55-9a3e-5f1f3b0f6a10",
        updater=UpdaterSettings(
            install_root=tmp_path / "install",
            state_dir=state_dir / "updater",
            trusted_keys=TrustedKeys.of(factory.trusted),
            platform="linux-x86_64",
            channel="stable",
            health_command=("true",),
        ),
    )
    recorder = Recorder()
    parts = build_daemon(
        settings,
        clock=ManualClock(NOW),
        stop=threading.Event(),
        check_in=SelfUpdateCheckIn(
            state_dir=state_dir, running=RunningBuild(own_root=layout.root, version=NEW)
        ),
        self_install=recorder,
        updater_version=NEW,
    )
    with parts.http, parts.download_http:
        parts.daemon.start()
        parts.daemon.tick()

    state = store.load()
    assert state.claim is None
    assert recorder.calls == []
    # Nothing reported for the run yet: its outcome comes with the commit, or from the old
    # build after a rollback.
    assert Outbox(state_dir / OUTBOX_DIR_NAME).pending() == []
    assert [r.status for r in state.recent_runs if r.run_id == RUN_ID] == []
    assert layout.link_target("current") == NEW and layout.link_target("previous") == OLD


def test_the_build_the_guard_restored_after_the_window_reports_the_run_once_rolled_back(
    layout: InstallLayout, state_dir: Path, tmp_path: Path
) -> None:
    """The daemon switched, but the disk refused the save of the claim's end and the unit was
    restarted all the same; the new build never checked in, and the guard took the switch back
    after the claim's window had closed. The build restored starts with the claim still in its
    state file: the switch's record decides the run's end — reported once, `rolled_back` — and
    the window's end must not report it a second time as "nothing was switched"."""
    factory, store = _claim_left_by_a_switch(layout, state_dir)
    restarted = tmp_path / "restarted"
    done = run_guard("check", state_dir, "--restart", f"touch {restarted}")
    assert done.returncode == 0, done.stderr
    assert layout.link_target("current") == OLD
    after_window = NOW + timedelta(minutes=40)
    recorder = Recorder()
    parts = build_daemon(
        _settings(factory, state_dir, tmp_path),
        clock=ManualClock(after_window),
        stop=threading.Event(),
        check_in=SelfUpdateCheckIn(
            state_dir=state_dir, running=RunningBuild(own_root=layout.root, version=OLD)
        ),
        self_install=recorder,
        updater_version=OLD,
    )
    with parts.http, parts.download_http:
        parts.daemon.start()
        parts.daemon.tick()
        parts.daemon.tick()

    state = store.load()
    assert state.claim is None
    assert recorder.calls == []
    reports = [r for r in Outbox(state_dir / OUTBOX_DIR_NAME).pending() if r.run_id == RUN_ID]
    assert [(r.body["status"], r.body.get("reason")) for r in reports] == [
        ("rolled_back", "health_check_failed")
    ]
    assert [r.status for r in state.recent_runs if r.run_id == RUN_ID] == ["rolled_back"]
    assert layout.link_target("current") == OLD


def _claim_left_by_a_switch(
    layout: InstallLayout, state_dir: Path
) -> tuple[ReleaseFactory, StateStore]:
    """A state file holding the claim of a run whose switch was made: what a daemon leaves when
    the disk refused the save of the claim's end (or it was killed before it)."""
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=1))
    release = factory.sign(
        b"bundle" * 50, version=NEW, manifest_version=7, product="updater", unpacked_size=300
    )
    claim = ClaimInProgress(
        run_id=RUN_ID,
        trigger="schedule",
        slot_key="2026-11-30T03:00",
        release_version=NEW,
        manifest_b64=base64.b64encode(release.manifest_bytes).decode(),
        signature_b64=base64.b64encode(release.signature).decode(),
        artifact_url="http://127.0.0.1:9/v1/agent/releases/x/artifact",
        claimed_at=NOW - timedelta(minutes=2),
        phase="dispatching",
        attempts=1,
        window_closes_at=NOW + timedelta(minutes=12),
        token_expires_at=NOW + timedelta(minutes=12),
    )
    store = StateStore(state_dir / STATE_FILE_NAME)
    store.save(DaemonState(claim=claim))
    switch(
        own_root=layout.root,
        state_dir=state_dir,
        to_version=NEW,
        now=datetime.now(UTC) - timedelta(minutes=11),
        restart=lambda: None,
        run=SwitchRun(run_id=RUN_ID, to_version=NEW, switched_at=NOW - timedelta(minutes=1)),
    )
    return factory, store


def _settings(factory: ReleaseFactory, state_dir: Path, tmp_path: Path) -> AgentSettings:
    (tmp_path / "install").mkdir(exist_ok=True)
    return AgentSettings(
        config_file=tmp_path / "agent.toml",
        state_dir=state_dir,
        control_url="http://127.0.0.1:9",
        credential="nwa_0123456789abcdef",
        agent_id="4f0e8a4c-8c0e-4a55-9a3e-5f1f3b0f6a10",
        updater=UpdaterSettings(
            install_root=tmp_path / "install",
            state_dir=state_dir / "updater",
            trusted_keys=TrustedKeys.of(factory.trusted),
            platform="linux-x86_64",
            channel="stable",
            health_command=("true",),
        ),
    )
