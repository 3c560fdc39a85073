"""The manifest's optional delta fields: the target's uncompressed tar, the patches offered to it.

    "tar_length": 30279680, "tar_sha256": "…",
    "patches": [{"base_version": "1.4.0", "base_tar_length": 30228480, "base_tar_sha256": "…",
                 "format": "zstd-patch-from", "length": 25055, "sha256": "…"}]

All three are absent from a manifest without patches, which is then byte for byte what it was
before deltas; an agent that does not know them ignores them and downloads the full artifact. A
patch is named by its base's tar hash: an agent offers the hash of the tar it verified on its own
disk, never a version string.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from signed_release.errors import InvalidField
from signed_release.versions import is_valid_version

__all__ = [
    "MAX_PATCHES",
    "PATCH_FORMAT",
    "PatchOffer",
    "check_delta_fields",
    "delta_fields_from",
    "delta_json",
    "patch_file_name",
]

PATCH_FORMAT: Final = "zstd-patch-from"
# `nachtwacht release` makes at most a handful; the bound keeps a manifest small.
MAX_PATCHES = 16
_MAX_JSON_INT = 2**53 - 1
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def _sha(field: str, value: object) -> None:
    if not isinstance(value, str) or not _SHA256_HEX.fullmatch(value):
        raise InvalidField(field, f"{value!r} is not 64 lower-case hex digits of a SHA-256")


def _count(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_JSON_INT:
        raise InvalidField(field, f"{value!r} is not an integer in 1..{_MAX_JSON_INT}")


@dataclass(frozen=True, kw_only=True)
class PatchOffer:
    """A patch from the build whose uncompressed tar is `base_tar_*` to the manifest's target tar;
    `length` and `sha256` describe the patch file."""

    base_version: str
    base_tar_length: int
    base_tar_sha256: str
    length: int
    sha256: str
    format: Literal["zstd-patch-from"] = PATCH_FORMAT

    def __post_init__(self) -> None:
        if not isinstance(self.base_version, str) or not is_valid_version(self.base_version):
            raise InvalidField(
                "patches.base_version",
                f"{self.base_version!r} is not a version (expected MAJOR.MINOR.PATCH)",
            )
        _count("patches.base_tar_length", self.base_tar_length)
        _sha("patches.base_tar_sha256", self.base_tar_sha256)
        _count("patches.length", self.length)
        _sha("patches.sha256", self.sha256)
        if self.format != PATCH_FORMAT:
            raise InvalidField(
                "patches.format", f"{self.format!r} is not supported (expected {PATCH_FORMAT!r})"
            )

    def to_json_object(self) -> dict[str, Any]:
        return {
            "base_tar_length": self.base_tar_length,
            "base_tar_sha256": self.base_tar_sha256,
            "base_version": self.base_version,
            "format": self.format,
            "length": self.length,
            "sha256": self.sha256,
        }


def patch_file_name(base_tar_sha256: str) -> str:
    """The file a patch is kept in beside its artifact, named by its base."""
    return f"patch-from-{base_tar_sha256[:16]}.zst"


def check_delta_fields(
    tar_length: int | None, tar_sha256: str | None, patches: tuple[PatchOffer, ...]
) -> None:
    if (tar_length is None) != (tar_sha256 is None):
        raise InvalidField("tar_sha256", "tar_length and tar_sha256 come together or not at all")
    if tar_length is not None:
        _count("tar_length", tar_length)
        _sha("tar_sha256", tar_sha256)
    if not isinstance(patches, tuple) or not all(isinstance(p, PatchOffer) for p in patches):
        raise InvalidField("patches", f"{patches!r} is not a list of patches")
    if patches and tar_length is None:
        raise InvalidField("patches", "patches need the target's tar_length and tar_sha256")
    if len(patches) > MAX_PATCHES:
        raise InvalidField("patches", f"{len(patches)} patches (expected at most {MAX_PATCHES})")
    bases = [patch.base_tar_sha256 for patch in patches]
    if len(set(bases)) != len(bases):
        raise InvalidField("patches", "two patches from one base (expected one patch per base)")


def delta_fields_from(fields: dict[str, Any]) -> dict[str, Any]:
    """The Manifest keyword arguments of the delta fields in a parsed manifest object."""
    raw_patches = fields.get("patches", [])
    if not isinstance(raw_patches, list) or len(raw_patches) > MAX_PATCHES:
        raise InvalidField("patches", f"expected a list of at most {MAX_PATCHES} patch objects")
    patches: list[PatchOffer] = []
    for raw in raw_patches:
        if not isinstance(raw, dict):
            raise InvalidField("patches", f"{raw!r} is not a patch object")
        missing = [
            n
            for n in (
                "base_version",
                "base_tar_length",
                "base_tar_sha256",
                "length",
                "sha256",
                "format",
            )
            if n not in raw
        ]
        if missing:
            raise InvalidField(f"patches.{missing[0]}", "is missing")
        patches.append(
            PatchOffer(
                base_version=raw["base_version"],
                base_tar_length=raw["base_tar_length"],
                base_tar_sha256=raw["base_tar_sha256"],
                length=raw["length"],
                sha256=raw["sha256"],
                format=raw["format"],
            )
        )
    return {
        "tar_length": fields.get("tar_length"),
        "tar_sha256": fields.get("tar_sha256"),
        "patches": tuple(patches),
    }


def delta_json(
    tar_length: int | None, tar_sha256: str | None, patches: tuple[PatchOffer, ...]
) -> dict[str, Any]:
    """The delta fields to sign; none at all when the manifest has no tar facts."""
    if tar_length is None:
        return {}
    result: dict[str, Any] = {"tar_length": tar_length, "tar_sha256": tar_sha256}
    if patches:
        result["patches"] = [patch.to_json_object() for patch in patches]
    return result
