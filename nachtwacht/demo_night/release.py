"""The demo's release key and its two signed builds, made with the real release tooling
(`nachtwacht release keygen | build-demo-agent | sign`) and published with
`nachtwacht control publish-release`, each a child process as a release engineer would run it."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ground.clock import FakeClock
from nachtwacht.demo_night.errors import DemoFailed
from nachtwacht.demo_night.platform import nachtwacht_command, repository_environment

__all__ = ["SignedBuild", "make_release_key", "publish", "sign_build"]

PLATFORM = "linux-x86_64"
CHANNEL = "stable"
# A deadline for a failure, not a speed expectation.
COMMAND_DEADLINE_SECONDS = 120.0


@dataclass(frozen=True, kw_only=True)
class SignedBuild:
    version: str
    manifest_version: int
    artifact: Path
    release_dir: Path

    @property
    def manifest(self) -> Path:
        return self.release_dir / "manifest.json"

    @property
    def signature(self) -> Path:
        return self.release_dir / "manifest.sig"


def _clock_setting(instant: datetime) -> str:
    """A real-speed fake clock showing `instant` now: what `sign` and `publish` should see."""
    return FakeClock(start=instant, anchor=time.time(), speed=1.0).setting()


def run_command(*args: str, shows: datetime | None = None) -> str:
    extra = {} if shows is None else {"NACHTWACHT_FAKE_CLOCK": _clock_setting(shows)}
    try:
        result = subprocess.run(
            nachtwacht_command(*args),
            env=repository_environment(extra),
            capture_output=True,
            text=True,
            check=False,
            timeout=COMMAND_DEADLINE_SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        raise DemoFailed(f"nachtwacht {' '.join(args[:2])} did not finish") from exc
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise DemoFailed(
            f"nachtwacht {' '.join(args[:2])} failed: {lines[-1] if lines else 'no message'}"
        )
    return result.stdout


def make_release_key(keys_dir: Path) -> Path:
    run_command("release", "keygen", "--out", str(keys_dir))
    return keys_dir / "release.pub"


def sign_build(
    *, version: str, manifest_version: int, keys_dir: Path, workdir: Path, signed_at: datetime
) -> SignedBuild:
    artifact = workdir / f"provibr-agent-{version}.tar.gz"
    release_dir = workdir / f"release-{version}"
    run_command("release", "build-demo-agent", "--version", version, "--out", str(artifact))
    run_command(
        "release",
        "sign",
        "--key",
        str(keys_dir / "release.key"),
        "--version",
        version,
        "--channel",
        CHANNEL,
        "--platform",
        PLATFORM,
        "--expires-in",
        "30d",
        "--manifest-version",
        str(manifest_version),
        "--out",
        str(release_dir),
        str(artifact),
        shows=signed_at,
    )
    return SignedBuild(
        version=version,
        manifest_version=manifest_version,
        artifact=artifact,
        release_dir=release_dir,
    )


def publish(build: SignedBuild, *, data_dir: Path, public_key: Path, at: datetime) -> None:
    """`nachtwacht control publish-release`: the control plane checks the signature first."""
    run_command(
        "control",
        "publish-release",
        "--data-dir",
        str(data_dir),
        "--release-public-key",
        str(public_key),
        str(build.manifest),
        str(build.signature),
        str(build.artifact),
        shows=at,
    )
