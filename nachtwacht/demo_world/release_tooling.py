"""Signed releases made with the real tooling, each step a child process as a release engineer runs
it: `nachtwacht release keygen`, `release build-demo-agent`, `release sign`, and
`nachtwacht control publish-release` (which checks the signature before storing anything).

The demo and the end-to-end tests use this path on purpose: it proves the commands, not only the
functions behind them. `releases.ReleaseFactory` makes the same things in memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ground.clock import FAKE_CLOCK_ENV
from nachtwacht.demo_world.children import SUBPROCESSES, Launcher, run_nachtwacht

__all__ = ["CHANNEL", "PLATFORM", "SignedBuild", "make_release_key", "publish", "sign_build"]

PLATFORM = "linux-x86_64"
CHANNEL = "stable"


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


def make_release_key(keys_dir: Path, *, launcher: Launcher = SUBPROCESSES) -> Path:
    """`release keygen`; returns the public key's path (the private one is beside it)."""
    run_nachtwacht("release", "keygen", "--out", str(keys_dir), launcher=launcher)
    return keys_dir / "release.pub"


def sign_build(
    *,
    version: str,
    manifest_version: int,
    keys_dir: Path,
    workdir: Path,
    clock_setting: str,
    channel: str = CHANNEL,
    platform: str = PLATFORM,
    fault: str = "none",
    launcher: Launcher = SUBPROCESSES,
    allow_downgrade: bool = False,
    bases: Sequence[Path] = (),
) -> SignedBuild:
    """Build `provibr-agent VERSION` and sign it for (`channel`, `platform`), on the clock
    `clock_setting` describes (the manifest's `issued_at` is that clock's now); `fault` builds a
    deliberately broken agent (`demo_agent.FAULTS`); `allow_downgrade` signs it as a rollback;
    `bases` (earlier releases' folders) get patches to it, written beside the artifact."""
    artifact = workdir / f"provibr-agent-{version}.tar.gz"
    release_dir = workdir / f"release-{channel}-{platform}-{version}-{manifest_version}"
    run_nachtwacht(
        "release", "build-demo-agent", "--version", version, "--fault", fault,
        "--out", str(artifact), launcher=launcher,
    )  # fmt: skip
    run_nachtwacht(
        "release", "sign", "--key", str(keys_dir / "release.key"), "--version", version,
        "--channel", channel, "--platform", platform, "--expires-in", "30d",
        "--manifest-version", str(manifest_version), "--out", str(release_dir), str(artifact),
        *(["--allow-downgrade"] if allow_downgrade else []),
        *(argument for base in bases for argument in ("--base", str(base))),
        env={FAKE_CLOCK_ENV: clock_setting}, launcher=launcher,
    )  # fmt: skip
    return SignedBuild(
        version=version,
        manifest_version=manifest_version,
        artifact=artifact,
        release_dir=release_dir,
    )


def publish(
    build: SignedBuild,
    *,
    location: Sequence[str],
    env: Mapping[str, str] | None = None,
    stage: str | None = None,
    launcher: Launcher = SUBPROCESSES,
    allow_downgrade: bool = False,
) -> None:
    """`control publish-release` against the database `location` names (`--data-dir DIR` or
    `--database-url URL`, plus `--release-public-key` when the environment names no key);
    `stage` is its `--stage` (default: the control plane's, canary after a pair's first);
    `allow_downgrade` its `--allow-downgrade`."""
    run_nachtwacht(
        "control",
        "publish-release",
        *location,
        *(["--stage", stage] if stage else []),
        *(["--allow-downgrade"] if allow_downgrade else []),
        str(build.manifest),
        str(build.signature),
        str(build.artifact),
        env=env,
        launcher=launcher,
    )
