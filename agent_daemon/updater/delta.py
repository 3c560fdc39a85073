"""Delta updates on the host: the base kept for the next patch, and the patch preferred over the
full artifact whenever the release offers one from that base.

The base is the uncompressed tar of a build this updater installed, kept as
`<install root>/bases/<version>.tar` (the disk cost: one uncompressed tar, roughly three times the
artifact, for the version being installed and the one it replaces, so a rollback keeps its base).
Which patch fits is decided by the sha256 of that file, read from disk at the moment of use — never
by the version in its name, so a base altered or truncated on disk matches no patch.

The patch comes from the same control plane and under the same token as the artifact
(`…/runs/<run>/patches/<base tar sha256>`, next to `…/runs/<run>/artifact`), downloaded with the
artifact's own resumable, length-bounded download against the signed patch length and sha256, and
applied with `signed_release.delta.apply_patch` (bounded memory, output bounded by the signed tar
length, result checked against the signed tar hash). The verified tar is then unpacked by the same
`unpack_build` with the same checks as an artifact. Any failure on that path falls back to the
full artifact in the same run; the fallback's reason is kept in `fallbacks` for the outcome.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from signed_release.delta import gunzip_artifact, tar_facts
from signed_release.delta_release import tar_limit
from signed_release.manifest import Manifest
from signed_release.patch_offer import PatchOffer

__all__ = [
    "BASES_DIR",
    "base_path",
    "keep_base",
    "offer_for",
    "patch_url",
    "patched_tar_path",
    "verified_patched_tar",
]

BASES_DIR = "bases"


def base_path(install_root: Path, version: str) -> Path:
    return install_root / BASES_DIR / f"{version}.tar"


def patched_tar_path(staging: Path, manifest: Manifest) -> Path:
    return staging / f"{manifest.tar_sha256}.tar"


def offer_for(
    install_root: Path, from_version: str | None, manifest: Manifest
) -> PatchOffer | None:
    """The patch the release offers from the base on this disk, by the base's hash as read now."""
    if from_version is None or not manifest.patches or manifest.tar_sha256 is None:
        return None
    base = base_path(install_root, from_version)
    if not base.is_file():
        return None
    length, sha256 = tar_facts(base)
    for offer in manifest.patches:
        if (offer.base_tar_sha256, offer.base_tar_length) == (sha256, length):
            return offer
    return None


def patch_url(artifact_url: str, offer: PatchOffer) -> str | None:
    """The patch's address beside the run's artifact; None when the artifact is not the control
    plane's run download (a mirror serves no patches)."""
    head, _, last = artifact_url.rpartition("/")
    if last != "artifact" or "/runs/" not in head:
        return None
    return f"{head}/patches/{offer.base_tar_sha256}"


def verified_patched_tar(staging: Path, manifest: Manifest) -> Path | None:
    """The patched tar in staging when it is exactly the signed tar (read again: a resumed update
    trusts nothing it left on disk)."""
    if manifest.tar_sha256 is None or manifest.tar_length is None:
        return None
    path = patched_tar_path(staging, manifest)
    if not path.is_file():
        return None
    if tar_facts(path) != (manifest.tar_length, manifest.tar_sha256):
        path.unlink(missing_ok=True)
        return None
    return path


def keep_base(
    install_root: Path,
    manifest: Manifest,
    *,
    artifact: Path | None,
    patched_tar: Path | None,
    keep: set[str],
) -> None:
    """Keep the installed build's tar as the next base; drop bases of versions not in `keep`."""
    bases = install_root / BASES_DIR
    bases.mkdir(mode=0o755, exist_ok=True)
    target = base_path(install_root, manifest.agent_version)
    temporary = target.with_suffix(".tmp")
    if patched_tar is not None:
        # A move, not a rename: the staging directory and the install root may be different
        # filesystems (or bind mounts, under the unit's ProtectSystem=strict).
        shutil.move(patched_tar, temporary)
    elif artifact is not None:
        limit = manifest.tar_length or tar_limit(manifest.unpacked_size)
        gunzip_artifact(artifact, temporary, limit=limit)
    else:
        return
    os.replace(temporary, target)
    for other in bases.iterdir():
        if (
            other.suffix == ".tar" and other.stem not in keep | {manifest.agent_version}
        ) or other.suffix == ".tmp":
            other.unlink(missing_ok=True)
