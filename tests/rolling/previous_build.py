"""The build the rolling-upgrade tests publish through the previous release's replica: 1.5.0,
manifest version 42, signed by the previous release's own tool with the keys in `tmp_path/keys`
(`generate_key_files` made them)."""

from __future__ import annotations

from pathlib import Path

from nachtwacht.demo_world.children import Subprocesses
from nachtwacht.demo_world.control_planes import RunningControlPlane
from nachtwacht.demo_world.release_tooling import SignedBuild, sign_build

__all__ = ["published_by_previous"]


def published_by_previous(
    previous: RunningControlPlane,
    tmp_path: Path,
    *,
    clock_setting: str,
    previous_release: Subprocesses,
) -> SignedBuild:
    """Signed and published through `previous`, the previous release's replica."""
    build = sign_build(
        version="1.5.0",
        manifest_version=42,
        keys_dir=tmp_path / "keys",
        workdir=tmp_path,
        clock_setting=clock_setting,
        launcher=previous_release,
    )
    previous.publish_release(build)
    return build
