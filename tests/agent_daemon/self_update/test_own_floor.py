"""The updater line's rollback floor: once a switch to a build of the updater committed, its
manifest is the floor, kept on disk; after a restart a replayed older manifest of the updater
(a newer version number, signed before it) is refused, and with no floor recorded it is not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from agent_daemon.commands.agent_parts import SelfUpdaterOnDemand, build_self_updater
from agent_daemon.self_update.own_floor import OWN_FLOOR_FILE_NAME
from agent_daemon.self_update.pending_switch import SwitchRun
from agent_daemon.settings import AgentSettings
from agent_daemon.updater.trusted_keys import TrustedKeys
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.contract import OutcomeReason
from tests.agent_daemon.self_update.recorder import Recorder
from tests.worlds.clocks import ManualClock
from tests.worlds.releases import Release, ReleaseFactory

NOW = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)
RUNNING = "1.1.0"


def _settings(tmp_path: Path, factory: ReleaseFactory) -> AgentSettings:
    (tmp_path / "install").mkdir(exist_ok=True)
    return AgentSettings(
        config_file=tmp_path / "agent.toml",
        state_dir=tmp_path / "state",
        # Nobody listens: a release that passes verification fails at its download.
        control_url="http://127.0.0.1:9",
        credential="nwa_0123456789abcdef",
        agent_id="4f0e8a4c-8c0e-4a55-9a3e-5f1f3b0f6a10",
        updater=UpdaterSettings(
            install_root=tmp_path / "install",
            state_dir=tmp_path / "state" / "updater",
            trusted_keys=TrustedKeys.of(factory.trusted),
            platform="linux-x86_64",
            channel="stable",
            health_command=("true",),
        ),
    )


def _apply(
    settings: AgentSettings, release: Release, client: httpx.Client
) -> tuple[UpdateOutcome, Recorder]:
    """A fresh self-updater on the same files (as after a restart) applying `release`."""
    recorder = Recorder()
    updater = build_self_updater(
        settings, http=client, clock=ManualClock(NOW), running=RUNNING, install=recorder
    )
    outcome = updater.apply(
        UpdateRequest(
            run_id="6a0d8f8e-52c5-4f11-9d5e-0c1b7a9e3f40",
            manifest=release.manifest_bytes,
            signature=release.signature,
            artifact_url="http://127.0.0.1:9/v1/agent/releases/x/artifact",
        )
    )
    assert isinstance(outcome, UpdateOutcome)
    return outcome, recorder


def test_a_replayed_older_manifest_of_the_updater_is_refused_after_a_restart(
    tmp_path: Path,
) -> None:
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=2))
    settings = _settings(tmp_path, factory)
    (key_id,) = factory.trusted
    replayed = factory.sign(
        b"bundle" * 50,
        version="1.2.0",
        manifest_version=15,
        product="updater",
        unpacked_size=300,
    )
    with httpx.Client(base_url=settings.control_url, timeout=2) as client:
        # No floor recorded: the older manifest passes verification (and fails at its download).
        outcome, recorder = _apply(settings, replayed, client)
        assert outcome.reason != OutcomeReason.VERIFICATION_FAILED, outcome.error

        # The switch to 1.1.0 (manifest 20) committed in the process before this one.
        committed = build_self_updater(
            settings, http=client, clock=ManualClock(NOW), running=RUNNING, install=Recorder()
        )
        assert isinstance(committed, SelfUpdaterOnDemand)
        committed.accept(
            SwitchRun(
                run_id="r", to_version=RUNNING, switched_at=NOW, manifest_version=20, signer=key_id
            )
        )
        assert (settings.updater.state_dir / OWN_FLOOR_FILE_NAME).is_file()

        outcome, recorder = _apply(settings, replayed, client)
    assert outcome.status == "failed"
    assert outcome.reason == OutcomeReason.VERIFICATION_FAILED
    assert outcome.error is not None and "rollback or replay" in outcome.error
    assert recorder.calls == []
    # And the daemon's plan sees the floor too.
    assert committed.accepted_floor(NOW) == 20
