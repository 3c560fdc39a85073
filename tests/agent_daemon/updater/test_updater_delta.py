"""Delta updates on a real host: the patch from the base on disk is preferred, and every hostile or
broken patch falls back to the full build in the same run (recorded in the outcome's notes)."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from agent_daemon.updater.delta import base_path
from agent_daemon.updater.updater import Updater
from ground.clock import SystemClock
from ground.contract import PatchFallbackReason
from signed_release.delta import make_patch
from signed_release.patch_offer import PatchOffer
from signed_release.signature import sign_manifest
from tests.agent_daemon.updater_support.host import Host, host_running
from tests.worlds.releases import Release

ARTIFACT = "/v1/agent/runs/run-1/artifact"


def _delta_release(
    host: Host,
    *,
    patch_from: bytes | None = None,
    patch_to: bytes | None = None,
    tar_sha256: str | None = None,
) -> tuple[Release, bytes, str]:
    """Release 1.5.0 signed with a patch from 1.4.1's tar (or from/to the given bytes)."""
    base = gzip.decompress(host.factory.release("1.4.1", 41).artifact)
    plain = host.factory.release("1.5.0", 42)
    target = gzip.decompress(plain.artifact)
    patch = make_patch(patch_from if patch_from is not None else base, patch_to or target)
    base_sha = hashlib.sha256(base).hexdigest()
    manifest = replace(
        plain.manifest,
        tar_length=len(target),
        tar_sha256=tar_sha256 or hashlib.sha256(target).hexdigest(),
        patches=(
            PatchOffer(
                base_version="1.4.1",
                base_tar_length=len(base),
                base_tar_sha256=base_sha,
                length=len(patch),
                sha256=hashlib.sha256(patch).hexdigest(),
            ),
        ),
    )
    data = manifest.to_bytes()
    signed = Release(
        manifest=manifest,
        manifest_bytes=data,
        signature=sign_manifest(data, host.factory.key),
        artifact=plain.artifact,
    )
    return signed, patch, f"/v1/agent/runs/run-1/patches/{base_sha}"


def test_the_patch_from_the_base_on_disk_is_used(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        assert base_path(host.install_root, "1.4.1").is_file()
        release, patch, patch_path = _delta_release(host)
        host.server.serve(patch_path, patch)
        outcome = host.apply(release, "run-1")
        assert (outcome.status, outcome.version, outcome.notes) == ("succeeded", "1.5.0", ())
        assert (outcome.delivery, outcome.fallback_reason) == ("patch", None)
        assert host.running_version() == "1.5.0"
        assert len(host.server.requests(patch_path)) == 1
        assert host.server.requests(ARTIFACT) == []
        # The patched tar is the next base; the replaced version's base is kept for a rollback.
        assert sorted(p.name for p in (host.install_root / "bases").iterdir()) == [
            "1.4.1.tar",
            "1.5.0.tar",
        ]


DOWNLOAD_FAILED = PatchFallbackReason.PATCH_DOWNLOAD_FAILED
REFUSED = PatchFallbackReason.PATCH_REFUSED


def _falls_back(host: Host, release: Release, expected: str, reason: PatchFallbackReason) -> None:
    outcome = host.apply(release, "run-1")
    assert (outcome.status, outcome.version) == ("succeeded", "1.5.0"), outcome.error
    assert host.running_version() == "1.5.0"
    assert len(host.server.requests(ARTIFACT)) == 1
    assert any(expected in note for note in outcome.notes), outcome.notes
    # Reported with the outcome, by a reason the control plane counts.
    assert (outcome.delivery, outcome.fallback_reason) == ("full", reason)


def test_a_base_altered_on_disk_takes_the_full_build(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release, patch, patch_path = _delta_release(host)
        host.server.serve(patch_path, patch)
        base = base_path(host.install_root, "1.4.1")
        altered = bytearray(base.read_bytes())
        altered[600] ^= 0xFF
        base.write_bytes(bytes(altered))
        _falls_back(
            host,
            release,
            "no patch offered fits this host's base",
            PatchFallbackReason.BASE_ALTERED,
        )
        assert host.server.requests(patch_path) == []


@pytest.mark.parametrize(
    ("case", "expected", "reason"),
    [
        # Not the signed bytes: refused by the download, as an artifact would be.
        pytest.param("corrupt", "patch from 1.4.1 not used", DOWNLOAD_FAILED, id="corrupt_patch"),
        pytest.param(
            "truncated", "patch from 1.4.1 not used", DOWNLOAD_FAILED, id="truncated_patch"
        ),
        # The signed bytes, but they do not make the signed build from this base.
        pytest.param(
            "another_base", "patch from 1.4.1 not used", REFUSED, id="patch_for_another_base"
        ),
        pytest.param("result_mismatch", "expected the signed", REFUSED, id="result_mismatch"),
        pytest.param("bomb", "passes the signed target length", REFUSED, id="patch_bomb"),
    ],
)
def test_a_broken_patch_falls_back_to_the_full_build(
    tmp_path: Path, case: str, expected: str, reason: PatchFallbackReason
) -> None:
    with host_running(tmp_path) as host:
        if case == "another_base":
            other = gzip.decompress(host.factory.release("1.3.0", 30).artifact)
            release, patch, patch_path = _delta_release(host, patch_from=other)
        elif case == "result_mismatch":
            release, patch, patch_path = _delta_release(host, tar_sha256="00" * 32)
        elif case == "bomb":
            target = gzip.decompress(host.factory.release("1.5.0", 42).artifact)
            release, patch, patch_path = _delta_release(host, patch_to=target + bytes(200_000))
        else:
            release, patch, patch_path = _delta_release(host)
        if case == "corrupt":
            broken = bytearray(patch)
            broken[len(broken) // 2] ^= 0xFF
            host.server.serve(patch_path, bytes(broken))
        elif case == "truncated":
            host.server.serve(patch_path, patch[: len(patch) // 2])
        else:
            host.server.serve(patch_path, patch)
        _falls_back(host, release, expected, reason)
        assert not any((host.install_root / "bases").glob("*.tmp"))


def test_a_missing_base_takes_the_full_build(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release, patch, patch_path = _delta_release(host)
        host.server.serve(patch_path, patch)
        base_path(host.install_root, "1.4.1").unlink()
        _falls_back(
            host,
            release,
            "no patch offered fits this host's base",
            PatchFallbackReason.BASE_MISSING,
        )
        assert host.server.requests(patch_path) == []


def test_a_patch_beyond_the_memory_bound_is_not_applied(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        # A signed target so long that base and target together pass the decoder's window bound.
        release, patch, patch_path = _delta_release(host)
        manifest = replace(release.manifest, tar_length=2**31)
        data = manifest.to_bytes()
        release = replace(
            release,
            manifest=manifest,
            manifest_bytes=data,
            signature=sign_manifest(data, host.factory.key),
        )
        host.server.serve(patch_path, patch)
        _falls_back(host, release, "need a window above", PatchFallbackReason.MEMORY_BOUND)


def test_a_patched_build_changed_before_its_install_takes_the_full_build(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        release, patch, patch_path = _delta_release(host)
        host.server.serve(patch_path, patch)
        patched = host.settings.state_dir / "staging" / f"{release.manifest.tar_sha256}.tar"

        def alter(step: str) -> None:
            if step == "downloaded":
                patched.write_bytes(patched.read_bytes()[:-1] + b"x")

        updater = Updater(
            settings=host.settings, client=httpx.Client(), clock=SystemClock(), on_step=alter
        )
        outcome = updater.apply(host.request(release, "run-1"))
        assert (outcome.status, outcome.version) == ("succeeded", "1.5.0"), outcome.error
        assert len(host.server.requests(patch_path)) == 1
        assert len(host.server.requests(ARTIFACT)) == 1
        assert (outcome.delivery, outcome.fallback_reason) == (
            "full",
            PatchFallbackReason.PATCHED_BUILD_CHANGED,
        )


def test_how_the_build_came_is_kept_across_an_interruption(tmp_path: Path) -> None:
    with host_running(tmp_path) as host:
        base_path(host.install_root, "1.4.1").unlink()
        release, patch, patch_path = _delta_release(host)
        host.server.serve(patch_path, patch)

        def interrupt(step: str) -> None:
            if step == "switching":
                raise OSError("the host went down")

        interrupted = Updater(
            settings=host.settings, client=httpx.Client(), clock=SystemClock(), on_step=interrupt
        )
        first = interrupted.apply(host.request(release, "run-1"))
        assert "update interrupted" in (first.error or ""), first
        assert host.state()["in_progress"]["step"] == "switching"
        # Another process carries it on from the state file and still knows why it came whole.
        outcome = host.updater().resume()
        assert outcome is not None
        assert (outcome.status, outcome.version) == ("succeeded", "1.5.0"), outcome.error
        assert (outcome.delivery, outcome.fallback_reason) == (
            "full",
            PatchFallbackReason.BASE_MISSING,
        )
