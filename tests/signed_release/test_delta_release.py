"""`nachtwacht release sign --base …`: patches from the newest earlier builds of the same pair."""

from __future__ import annotations

from pathlib import Path

import pytest

from nachtwacht.demo_world.demo_agent import build_demo_agent
from nachtwacht.release_cli import main
from signed_release.delta import apply_patch, gunzip_artifact
from signed_release.manifest import parse_manifest
from signed_release.patch_offer import patch_file_name


def _release(tmp_path: Path, version: str, number: int, *, platform: str = "linux-x86_64") -> Path:
    folder = tmp_path / "releases" / f"{version}-{platform}"
    folder.mkdir(parents=True)
    artifact = folder / f"agent-{version}.tar.gz"
    build_demo_agent(artifact, version=version)
    argv = [
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", version,
        "--platform", platform, "--manifest-version", str(number), "--out", str(folder),
        str(artifact),
    ]  # fmt: skip
    assert main(argv) == 0
    return folder


def test_sign_makes_patches_from_the_newest_builds_of_the_pair(tmp_path: Path) -> None:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    for number, version in enumerate(("1.0.0", "1.1.0", "1.2.0", "1.3.0"), start=1):
        _release(tmp_path, version, number)
    _release(tmp_path, "1.3.1", 5, platform="linux-aarch64")
    target = tmp_path / "new" / "agent-1.4.0.tar.gz"
    target.parent.mkdir()
    build_demo_agent(target, version="1.4.0")
    argv = [
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.4.0",
        "--platform", "linux-x86_64", "--manifest-version", "9", "--out", str(target.parent),
        "--base", str(tmp_path / "releases"), "--patches", "2", str(target),
    ]  # fmt: skip
    assert main(argv) == 0

    manifest = parse_manifest((target.parent / "manifest.json").read_bytes())
    assert [offer.base_version for offer in manifest.patches] == ["1.3.0", "1.2.0"]
    assert manifest.tar_length is not None and manifest.tar_sha256 is not None
    for offer in manifest.patches:
        base_folder = tmp_path / "releases" / f"{offer.base_version}-linux-x86_64"
        base_tar = tmp_path / f"{offer.base_version}.tar"
        assert gunzip_artifact(
            base_folder / f"agent-{offer.base_version}.tar.gz", base_tar, limit=10**8
        ) == (offer.base_tar_length, offer.base_tar_sha256)
        patch = target.parent / patch_file_name(offer.base_tar_sha256)
        assert patch.stat().st_size == offer.length
        apply_patch(
            base_tar,
            patch,
            tmp_path / "out.tar",
            target_length=manifest.tar_length,
            target_sha256=manifest.tar_sha256,
        )


def test_a_base_folder_without_its_build_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    folder = _release(tmp_path, "1.0.0", 1)
    for build in folder.glob("*.tar.gz"):
        build.unlink()
    target = tmp_path / "agent-1.1.0.tar.gz"
    build_demo_agent(target, version="1.1.0")
    argv = [
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.1.0",
        "--platform", "linux-x86_64", "--out", str(tmp_path / "out"),
        "--base", str(folder), str(target),
    ]  # fmt: skip
    assert main(argv) == 2
    assert "no .tar.gz beside it is the build it signs" in capsys.readouterr().err
