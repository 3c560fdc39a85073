"""Patches between uncompressed build tars: made, applied, and every hostile patch refused."""

from __future__ import annotations

import gzip
import hashlib
import random
from pathlib import Path

import pytest

from signed_release.delta import (
    PatchRefused,
    apply_patch,
    gunzip_artifact,
    make_patch,
    patch_memory_bound,
    tar_facts,
    window_bytes,
)
from signed_release.errors import InvalidField
from signed_release.manifest import Manifest, parse_manifest
from signed_release.patch_offer import PatchOffer
from tests.signed_release.conftest import manifest_json


def _tar_like(seed: int, size: int) -> bytes:
    return random.Random(seed).randbytes(size)


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, bytes, bytes, Path]:
    """A base, a target that is the base with a few changes, and the patch between them."""
    base = _tar_like(1, 300_000)
    target = base[:100_000] + b"a new module" * 500 + base[100_000:250_000] + _tar_like(2, 4000)
    base_path = tmp_path / "base.tar"
    base_path.write_bytes(base)
    patch_path = tmp_path / "patch.zst"
    patch_path.write_bytes(make_patch(base, target))
    return base_path, base, target, patch_path


def _apply(base: Path, patch: Path, target: bytes, out: Path) -> None:
    apply_patch(
        base,
        patch,
        out,
        target_length=len(target),
        target_sha256=hashlib.sha256(target).hexdigest(),
    )


def test_a_patch_makes_the_target_tar_and_is_small(
    pair: tuple[Path, bytes, bytes, Path], tmp_path: Path
) -> None:
    base_path, _, target, patch_path = pair
    out = tmp_path / "out.tar"
    _apply(base_path, patch_path, target, out)
    assert out.read_bytes() == target
    # The changes are 10 kB of 310 kB; a patch carries little more than them.
    assert patch_path.stat().st_size < 15_000


def test_a_patch_for_another_base_is_refused(
    pair: tuple[Path, bytes, bytes, Path], tmp_path: Path
) -> None:
    _, base, target, patch_path = pair
    other = tmp_path / "other.tar"
    other.write_bytes(_tar_like(3, len(base)))
    out = tmp_path / "out.tar"
    with pytest.raises(PatchRefused, match=r"sha256|cannot be applied"):
        _apply(other, patch_path, target, out)
    assert not out.exists()


def test_a_base_altered_on_disk_is_refused(
    pair: tuple[Path, bytes, bytes, Path], tmp_path: Path
) -> None:
    base_path, base, target, patch_path = pair
    altered = bytearray(base)
    altered[150_000] ^= 0xFF
    base_path.write_bytes(bytes(altered))
    out = tmp_path / "out.tar"
    with pytest.raises(PatchRefused):
        _apply(base_path, patch_path, target, out)
    assert not out.exists()


def test_a_result_that_is_not_the_signed_tar_is_refused(
    pair: tuple[Path, bytes, bytes, Path], tmp_path: Path
) -> None:
    base_path, _, target, patch_path = pair
    out = tmp_path / "out.tar"
    with pytest.raises(PatchRefused, match="expected the signed"):
        apply_patch(base_path, patch_path, out, target_length=len(target), target_sha256="00" * 32)
    assert not out.exists()


def test_a_truncated_patch_is_refused(
    pair: tuple[Path, bytes, bytes, Path], tmp_path: Path
) -> None:
    base_path, _, target, patch_path = pair
    patch_path.write_bytes(patch_path.read_bytes()[:-20])
    out = tmp_path / "out.tar"
    with pytest.raises(PatchRefused, match=r"truncated|cannot be applied"):
        _apply(base_path, patch_path, target, out)
    assert not out.exists()


def test_bytes_after_the_patch_are_refused(
    pair: tuple[Path, bytes, bytes, Path], tmp_path: Path
) -> None:
    base_path, _, target, patch_path = pair
    patch_path.write_bytes(patch_path.read_bytes() + b"more")
    with pytest.raises(PatchRefused, match="bytes follow"):
        _apply(base_path, patch_path, target, tmp_path / "out.tar")


def test_a_patch_bomb_stops_at_the_signed_length(tmp_path: Path) -> None:
    # 900 kB of zeros from a 100 kB base: within the same decoder window as the signed 200 kB
    # target, so only the output bound stands between the patch and the disk.
    base = _tar_like(4, 100_000)
    (tmp_path / "base.tar").write_bytes(base)
    bomb = tmp_path / "bomb.zst"
    bomb.write_bytes(make_patch(base, bytes(900_000)))
    assert window_bytes(100_000, 900_000) == window_bytes(100_000, 200_000)
    out = tmp_path / "out.tar"
    with pytest.raises(PatchRefused, match="passes the signed target length 200000"):
        apply_patch(
            tmp_path / "base.tar", bomb, out, target_length=200_000, target_sha256="00" * 32
        )
    assert not out.exists()


def test_a_patch_asking_for_a_larger_window_than_the_signed_sizes_is_refused(
    tmp_path: Path,
) -> None:
    # The memory bound: the decoder's window comes from the signed lengths, not from the patch.
    base = _tar_like(5, 100_000)
    (tmp_path / "base.tar").write_bytes(base)
    bomb = tmp_path / "bomb.zst"
    bomb.write_bytes(make_patch(base, bytes(8_000_000)))
    with pytest.raises(PatchRefused, match="cannot be applied"):
        apply_patch(
            tmp_path / "base.tar",
            bomb,
            tmp_path / "out.tar",
            target_length=200_000,
            target_sha256="00" * 32,
        )


def test_the_memory_bound_is_the_base_and_the_window() -> None:
    assert patch_memory_bound(30_000_000, 30_000_000) == 30_000_000 + 2**26


def test_gunzip_gives_the_tar_and_stops_at_its_limit(tmp_path: Path) -> None:
    tar = _tar_like(6, 200_000) + bytes(300_000)
    artifact = tmp_path / "a.tar.gz"
    artifact.write_bytes(gzip.compress(tar))
    assert gunzip_artifact(artifact, tmp_path / "a.tar", limit=len(tar)) == (
        len(tar),
        hashlib.sha256(tar).hexdigest(),
    )
    assert tar_facts(tmp_path / "a.tar") == (len(tar), hashlib.sha256(tar).hexdigest())
    with pytest.raises(PatchRefused, match="passes 499999 bytes"):
        gunzip_artifact(artifact, tmp_path / "b.tar", limit=len(tar) - 1)
    assert not (tmp_path / "b.tar").exists()


def _offer(**overrides: object) -> dict[str, object]:
    fields: dict[str, object] = {
        "base_version": "1.4.0",
        "base_tar_length": 1000,
        "base_tar_sha256": "cd" * 32,
        "format": "zstd-patch-from",
        "length": 99,
        "sha256": "ef" * 32,
    }
    fields.update(overrides)
    return fields


def test_a_manifest_with_patches_reads_back_from_its_bytes(manifest: Manifest) -> None:
    from dataclasses import replace

    offer = PatchOffer(
        base_version="1.4.0",
        base_tar_length=1000,
        base_tar_sha256="cd" * 32,
        length=99,
        sha256="ef" * 32,
    )
    with_patches = replace(manifest, tar_length=5000, tar_sha256="12" * 32, patches=(offer,))
    assert parse_manifest(with_patches.to_bytes()) == with_patches
    assert b"patches" not in manifest.to_bytes()
    assert b"tar_sha256" not in manifest.to_bytes()


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        pytest.param({"patches": [_offer()]}, "patches", id="patches_without_tar_facts"),
        pytest.param(
            {"tar_length": 5000, "tar_sha256": "12" * 32, "patches": [_offer(format="bsdiff")]},
            "patches.format",
            id="unknown_format",
        ),
        pytest.param(
            {"tar_length": 5000, "tar_sha256": "12" * 32, "patches": [_offer(length=0)]},
            "patches.length",
            id="empty_patch",
        ),
        pytest.param(
            {"tar_length": 5000, "tar_sha256": "12" * 32, "patches": [_offer(), _offer()]},
            "patches",
            id="two_patches_from_one_base",
        ),
        pytest.param({"tar_length": 5000}, "tar_sha256", id="length_without_hash"),
        pytest.param(
            {"tar_length": 5000, "tar_sha256": "12" * 32, "patches": [_offer(sha256="x")]},
            "patches.sha256",
            id="bad_patch_hash",
        ),
    ],
)
def test_ill_formed_delta_fields_are_refused_by_name(
    overrides: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidField) as caught:
        parse_manifest(manifest_json(**overrides))
    assert caught.value.field == field
