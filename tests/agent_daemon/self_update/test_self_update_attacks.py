"""An attacker's pass over the updater's own release and the trust root it is verified with: a
build of the updater signed by a key the trust root has retired, under an expired root, under a
root file someone else wrote (an older version put back by another user), a manifest past its
size bound or with a field twice under a trusted signature. Each is refused by
verification, before any byte is downloaded, and nothing on disk changes: not the updater's own
builds and links, not the state directory (the updater's floor, the switch's files, staging),
not the held trust root. Real roots (`RootChain`), real files; the host's install mechanism is a
recorder, which must never be called."""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.commands.agent_parts import build_self_updater
from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from agent_daemon.settings import AgentSettings
from agent_daemon.updater.layout import InstallLayout
from agent_daemon.updater.trusted_keys import TrustedKeys
from agent_daemon.updater.update_records import UpdateOutcome, UpdateRequest
from agent_daemon.updater.updater_settings import UpdaterSettings
from ground.contract import OutcomeReason
from signed_release.signature import sign_manifest
from tests.agent_daemon.self_update.recorder import Recorder
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.worlds.clocks import ManualClock
from tests.worlds.releases import Release, ReleaseFactory

NOW = datetime(2026, 11, 30, 2, 3, tzinfo=UTC)
RUNNING = "1.0.0"
RUN_ID = "6a0d8f8e-52c5-4f11-9d5e-0c1b7a9e3f40"


def _on_disk(root: Path) -> dict[str, str]:
    """Every file, folder and link under `root`: content hash, mode, link target."""
    found: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        name = str(path.relative_to(root))
        if path.is_symlink():
            found[name] = f"link {os.readlink(path)}"
        elif path.is_file():
            found[name] = (
                f"{info.st_mode:o} {info.st_uid} {hashlib.sha256(path.read_bytes()).hexdigest()}"
            )
        else:
            found[name] = f"dir {info.st_mode:o}"
    return found


class World:
    """A host whose updater runs build 1.0.0 of its own root, holding `root` as its trust root."""

    def __init__(self, tmp_path: Path, root: bytes, *, legacy: ReleaseFactory) -> None:
        self.tmp_path = tmp_path
        own = InstallLayout(tmp_path / "own")
        own.ensure()
        (own.version_dir(RUNNING) / "venv").mkdir(parents=True)
        (own.version_dir(RUNNING) / ".complete").write_text("sha\n")
        own.point("current", RUNNING)
        state_dir = tmp_path / "state"
        state_dir.mkdir(mode=0o700)
        (tmp_path / "install").mkdir()
        self.held = HeldTrustRootFile(state_dir / "trust_root.json")
        self.held.save(root)
        self.settings = AgentSettings(
            config_file=tmp_path / "agent.toml",
            state_dir=state_dir,
            # Nobody listens: a release that passed verification would fail at its download.
            control_url="http://127.0.0.1:9",
            credential="nwa_0123456789abcdef",
            agent_id="4f0e8a4c-8c0e-4a55-9a3e-5f1f3b0f6a10",
            updater=UpdaterSettings(
                install_root=tmp_path / "install",
                state_dir=state_dir / "updater",
                # The key files trust the old key too: with a root held, they count for nothing.
                trusted_keys=TrustedKeys.of(legacy.trusted),
                trust_root_file=self.held.path,
                platform="linux-x86_64",
                channel="stable",
                health_command=("true",),
            ),
        )

    def apply(self, release: Release) -> tuple[UpdateOutcome, Recorder]:
        recorder = Recorder()
        with httpx.Client(base_url=self.settings.control_url, timeout=2) as client:
            updater = build_self_updater(
                self.settings,
                http=client,
                clock=ManualClock(NOW),
                running=RUNNING,
                install=recorder,
            )
            outcome = updater.apply(
                UpdateRequest(
                    run_id=RUN_ID,
                    manifest=release.manifest_bytes,
                    signature=release.signature,
                    artifact_url="http://127.0.0.1:9/v1/agent/runs/x/artifact",
                )
            )
        assert isinstance(outcome, UpdateOutcome), outcome
        return outcome, recorder


def _updater_release(factory: ReleaseFactory, key: Ed25519PrivateKey | None = None) -> Release:
    return factory.sign(
        b"bundle" * 50,
        version="1.1.0",
        manifest_version=30,
        product="updater",
        unpacked_size=300,
        key=key,
    )


def _refused(world: World, release: Release, words: str) -> None:
    before = _on_disk(world.tmp_path)
    outcome, recorder = world.apply(release)
    assert (outcome.status, outcome.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert words in (outcome.error or ""), outcome.error
    assert outcome.version == RUNNING
    assert not outcome.retry
    assert "Traceback" not in (outcome.error or "")
    assert recorder.calls == []
    assert _on_disk(world.tmp_path) == before


def test_an_updater_release_signed_by_a_retired_key_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=2))
    chain = RootChain(release_key=factory.key)
    # v2 retires the old release key (A) for a new one (B).
    key_b = Ed25519PrivateKey.generate()
    world = World(tmp_path, chain.next(release_keys=[key_b]), legacy=factory)
    _refused(world, _updater_release(factory), "is not a trusted release key")
    # The new key's release of the same build passes verification (and fails at its download:
    # nobody listens), so the refusal above was the key's.
    outcome, _ = world.apply(_updater_release(factory, key=key_b))
    assert outcome.reason != OutcomeReason.VERIFICATION_FAILED, outcome.error


def test_an_updater_release_under_an_expired_root_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=2))
    chain = RootChain(release_key=factory.key, expires=NOW - timedelta(minutes=1))
    world = World(tmp_path, chain.versions[1], legacy=factory)
    _refused(world, _updater_release(factory), "expired at")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's needs root")
def test_an_older_root_put_back_by_another_user_is_refused_and_changes_nothing(
    tmp_path: Path,
) -> None:
    """The held root is what the host trusts, read back without a signature check; so only root
    or the daemon's user may have written it. An older version (which still trusted the retired
    key) put back by anyone else is refused as unusable, and every release with it."""
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=2))
    chain = RootChain(release_key=factory.key)
    key_b = Ed25519PrivateKey.generate()
    world = World(tmp_path, chain.next(release_keys=[key_b]), legacy=factory)
    world.held.path.write_bytes(chain.versions[1])
    os.chown(world.held.path, 12345, 12345)
    _refused(world, _updater_release(factory), "held trust root is unusable")


@pytest.mark.parametrize(
    ("padding", "words"),
    [
        pytest.param(70 * 1024, "larger than the limit of 65536", id="manifest_past_64_KiB"),
        pytest.param(0, "appears more than once", id="duplicate_key"),
    ],
)
def test_an_absurd_manifest_signed_by_a_trusted_key_is_refused_and_changes_nothing(
    tmp_path: Path, padding: int, words: str
) -> None:
    """What the control plane serves is not trusted for its size or its shape, even under a
    signature the root vouches for: a manifest past its bound, or one whose field appears twice
    (the last one would win in a naive reader), is refused before anything is read from it."""
    factory = ReleaseFactory(issued_at=NOW - timedelta(days=2))
    world = World(tmp_path, RootChain(release_key=factory.key).versions[1], legacy=factory)
    good = _updater_release(factory)
    text = good.manifest_bytes.decode()
    if padding:
        body = text.rstrip().rstrip("}") + f', "padding": "{"x" * padding}"}}\n'
    else:
        body = text.rstrip().rstrip("}") + ', "agent_version": "9.9.9"}\n'
    manifest = body.encode()
    release = Release(
        manifest=good.manifest,
        manifest_bytes=manifest,
        signature=sign_manifest(manifest, factory.key),
        artifact=good.artifact,
    )
    _refused(world, release, words)
