"""`nachtwacht release sign --base …`: the patches from earlier builds to the one being signed.

A base is an earlier release as the release engineer keeps it: a folder holding its `manifest.json`
and its build (the `.tar.gz` whose length and sha256 the manifest names), or a folder of such
folders. Of those of the same channel and platform, the newest `count` by manifest_version get a
patch, written beside the artifact as `patch-from-<first 16 hex of the base tar's sha256>.zst`.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from signed_release.artifact import describe_artifact
from signed_release.delta import gunzip_artifact, make_patch
from signed_release.errors import ArtifactError
from signed_release.manifest import Manifest, parse_manifest
from signed_release.patch_offer import PatchOffer, patch_file_name

__all__ = ["BaseBuild", "DeltaFacts", "find_bases", "make_patches"]

# A tar is its members' bytes plus headers and padding; a build's tar is never near this multiple
# of its signed unpacked size, so the limit only stops a corrupt or hostile gzip stream.
_TAR_SLACK = 2
_TAR_MINIMUM = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class BaseBuild:
    manifest: Manifest
    artifact: Path


@dataclass(frozen=True, kw_only=True)
class DeltaFacts:
    tar_length: int
    tar_sha256: str
    patches: tuple[PatchOffer, ...]
    files: tuple[Path, ...]


def tar_limit(unpacked_size: int) -> int:
    return max(_TAR_MINIMUM, unpacked_size * _TAR_SLACK)


def _manifests_under(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "manifest.json").is_file():
        return [path / "manifest.json"]
    found = sorted(path.glob("*/manifest.json"))
    if not found:
        raise ArtifactError(
            f"--base {path}: holds no manifest.json (expected an earlier release's folder or a "
            "folder of them)"
        )
    return found


def _build_beside(manifest_path: Path, manifest: Manifest) -> Path:
    for candidate in sorted(manifest_path.parent.glob("*.tar.gz")):
        facts = describe_artifact(candidate)
        if (facts.length, facts.sha256) == (manifest.length, manifest.sha256):
            return candidate
    raise ArtifactError(
        f"--base {manifest_path}: no .tar.gz beside it is the build it signs "
        f"({manifest.length} bytes, sha256 {manifest.sha256[:16]}…)"
    )


def find_bases(
    paths: list[Path], *, channel: str, platform: str, version: str, count: int
) -> list[BaseBuild]:
    """The newest `count` earlier builds of this channel and platform, newest first."""
    candidates: list[tuple[Path, Manifest]] = []
    for path in paths:
        for manifest_path in _manifests_under(path):
            manifest = parse_manifest(manifest_path.read_bytes())
            if (manifest.channel, manifest.platform) == (channel, platform) and (
                manifest.agent_version != version
            ):
                candidates.append((manifest_path, manifest))
    candidates.sort(key=lambda found: found[1].manifest_version, reverse=True)
    chosen: list[BaseBuild] = []
    seen: set[str] = set()
    for manifest_path, manifest in candidates:
        if len(chosen) == count:
            break
        if manifest.sha256 in seen:
            continue
        seen.add(manifest.sha256)
        chosen.append(BaseBuild(manifest=manifest, artifact=_build_beside(manifest_path, manifest)))
    return chosen


def make_patches(artifact: Path, unpacked_size: int, bases: list[BaseBuild]) -> DeltaFacts:
    """The target's tar facts and a patch from each base, written beside `artifact`."""
    with tempfile.TemporaryDirectory(prefix="nachtwacht-delta-") as temp:
        target_tar = Path(temp) / "target.tar"
        tar_length, tar_sha256 = gunzip_artifact(
            artifact, target_tar, limit=tar_limit(unpacked_size)
        )
        target = target_tar.read_bytes()
        offers: list[PatchOffer] = []
        files: list[Path] = []
        for base in bases:
            base_tar = Path(temp) / "base.tar"
            base_length, base_sha256 = gunzip_artifact(
                base.artifact, base_tar, limit=tar_limit(base.manifest.unpacked_size)
            )
            if base_sha256 == tar_sha256:
                continue
            patch = make_patch(base_tar.read_bytes(), target)
            patch_path = artifact.parent / patch_file_name(base_sha256)
            patch_path.write_bytes(patch)
            files.append(patch_path)
            offers.append(
                PatchOffer(
                    base_version=base.manifest.agent_version,
                    base_tar_length=base_length,
                    base_tar_sha256=base_sha256,
                    length=len(patch),
                    sha256=hashlib.sha256(patch).hexdigest(),
                )
            )
    return DeltaFacts(
        tar_length=tar_length, tar_sha256=tar_sha256, patches=tuple(offers), files=tuple(files)
    )
