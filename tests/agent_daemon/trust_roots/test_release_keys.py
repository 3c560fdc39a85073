"""With a trust root held, an update is verified with the root's release keys — read when the update
runs — and never with the key files; an expired or unusable root refuses every release. Real
updater, real builds, a real supervised agent on a temporary host."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from agent_daemon.disk.held_trust_root import HeldTrustRootFile
from ground.contract import OutcomeReason
from tests.agent_daemon.trust_roots.chain import RootChain
from tests.agent_daemon.updater_support.host import Host, host_running


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    # Installed with the factory's key (A), which the host's key files trust.
    with host_running(tmp_path / "host") as running:
        yield running


def _hold(host: Host, body: bytes) -> Host:
    held = HeldTrustRootFile(host.state_dir.parent / "trust_root.json")
    held.save(body)
    host.settings = replace(host.settings, trust_root_file=held.path)
    return host


def test_a_held_root_trusts_its_release_keys_and_not_the_key_files(host: Host) -> None:
    key_b = Ed25519PrivateKey.generate()
    _hold(host, RootChain(release_key=key_b).versions[1])

    by_a = host.apply(host.factory.release("1.5.0", 50), "run-a")
    assert (by_a.status, by_a.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert "is not a trusted release key" in (by_a.error or "")
    assert host.current() == "versions/1.4.1"

    by_b = host.apply(host.factory.release("1.5.0", 51, key=key_b), "run-b")
    assert (by_b.status, by_b.version) == ("succeeded", "1.5.0")


def test_a_root_that_dropped_a_key_refuses_a_release_already_offered(host: Host) -> None:
    key_a = host.factory.key
    chain = RootChain(release_key=key_a)
    _hold(host, chain.versions[1])
    updater = host.updater()
    offered = host.request(host.factory.release("1.5.0", 50), "run-offered")
    # The operators publish v2 without A, and the daemon stores it before the update runs.
    HeldTrustRootFile(host.settings.trust_root_file).save(  # type: ignore[arg-type]
        chain.next(release_keys=[Ed25519PrivateKey.generate()])
    )
    outcome = updater.apply(offered)
    assert (outcome.status, outcome.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert host.current() == "versions/1.4.1"


def test_an_expired_root_refuses_every_release_saying_why(host: Host) -> None:
    expired_at = datetime.now(UTC) - timedelta(minutes=5)
    chain = RootChain(release_key=host.factory.key, expires=expired_at)
    _hold(host, chain.versions[1])
    outcome = host.apply(host.factory.release("1.5.0", 50), "run-expired")
    assert (outcome.status, outcome.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert "trust root v1 expired at" in (outcome.error or "")
    assert "no release is accepted" in (outcome.error or "")
    assert host.current() == "versions/1.4.1"


def test_a_root_file_others_could_write_is_refused(host: Host) -> None:
    _hold(host, RootChain(release_key=host.factory.key).versions[1])
    assert host.settings.trust_root_file is not None
    host.settings.trust_root_file.chmod(0o666)
    outcome = host.apply(host.factory.release("1.5.0", 50), "run-writable")
    assert (outcome.status, outcome.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert "held trust root is unusable" in (outcome.error or "")


def test_a_fast_forward_by_a_dropped_key_does_not_outlive_its_revocation(host: Host) -> None:
    """A stolen key A signs a manifest with an absurd manifest_version; the host accepts it (here
    it installs; a broken build would raise the floor the same). The root that drops A takes that
    floor with it: B's next release, numbered as usual, installs. While A is trusted, it does
    not."""
    key_a = host.factory.key
    key_b = Ed25519PrivateKey.generate()
    chain = RootChain(release_key=key_a)
    _hold(host, chain.versions[1])
    huge = 2**53 - 1  # the largest manifest_version there is
    assert host.apply(host.factory.release("1.5.0", huge), "run-stolen").status == "succeeded"
    # v2 names A and B: A's floor still holds for B's releases.
    HeldTrustRootFile(host.settings.trust_root_file).save(  # type: ignore[arg-type]
        chain.next(release_keys=[key_a, key_b])
    )
    held_back = host.apply(host.factory.release("1.6.0", 60, key=key_b), "run-held-back")
    assert (held_back.status, held_back.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert f"not above {huge}" in (held_back.error or "")
    # v3 drops A.
    HeldTrustRootFile(host.settings.trust_root_file).save(  # type: ignore[arg-type]
        chain.next(release_keys=[key_b])
    )
    after = host.apply(host.factory.release("1.6.0", 61, key=key_b), "run-after")
    assert (after.status, after.version) == ("succeeded", "1.6.0")
    # B's own floor holds: a replay of an older B manifest is a rollback.
    replay = host.apply(host.factory.release("1.6.1", 60, key=key_b), "run-replay")
    assert (replay.status, replay.reason) == ("failed", OutcomeReason.VERIFICATION_FAILED)
    assert "not above 61" in (replay.error or "")
