"""`product` in the signed manifest: absent means the managed agent; `nachtwacht release sign
--product updater` signs nachtwacht's own agent, whose build is the offline bundle."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from nachtwacht.release_cli import main
from signed_release.errors import InvalidField
from signed_release.manifest import parse_manifest
from tests.signed_release.conftest import manifest_json


def _bundle(path: Path, *, executable: bool = True) -> Path:
    """A bundle as `bin/package` makes it: one folder with install.sh beside the wheels."""
    folder = "nachtwacht-agent-bundle-2.1.0-linux-x86_64"
    with tarfile.open(path, "w:gz") as archive:
        for name, data, mode in [
            (f"{folder}/install.sh", b"#!/bin/sh\n", 0o755 if executable else 0o644),
            (f"{folder}/wheels/nachtwacht_agent-2.1.0-py3-none-any.whl", b"PK", 0o644),
        ]:
            member = tarfile.TarInfo(name)
            member.size, member.mode = len(data), mode
            archive.addfile(member, io.BytesIO(data))
    return path


def _sign(tmp_path: Path, artifact: Path, *extra: str) -> int:
    if not (tmp_path / "keys").exists():
        assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    return main(
        [
            "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "2.1.0",
            "--platform", "linux-x86_64", "--out", str(tmp_path / "out"), *extra, str(artifact),
        ]
    )  # fmt: skip


def test_a_manifest_without_a_product_is_the_managed_agents() -> None:
    assert parse_manifest(manifest_json()).product == "agent"


def test_an_agent_manifest_is_signed_without_the_field(tmp_path: Path) -> None:
    # So an agent build signs the very bytes it signed before the product line existed.
    artifact = tmp_path / "agent.tar.gz"
    assert main(["build-demo-agent", "--version", "2.1.0", "--out", str(artifact)]) == 0
    assert _sign(tmp_path, artifact) == 0
    assert b"product" not in (tmp_path / "out/manifest.json").read_bytes()


def test_an_unknown_product_is_refused_by_name() -> None:
    with pytest.raises(InvalidField, match="product: 'kernel' is not a product"):
        parse_manifest(manifest_json(product="kernel"))


def test_the_updater_is_signed_from_its_bundle_and_verified_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path / "bundle.tar.gz")
    assert _sign(tmp_path, bundle, "--product", "updater") == 0
    manifest = parse_manifest((tmp_path / "out/manifest.json").read_bytes())
    assert (manifest.product, manifest.agent_version) == ("updater", "2.1.0")
    assert "signed 2.1.0 (updater) for stable/linux-x86_64" in capsys.readouterr().out
    verified = main(
        [
            "verify", "--public-key", str(tmp_path / "keys/release.pub"),
            "--artifact", str(bundle),
            str(tmp_path / "out/manifest.json"), str(tmp_path / "out/manifest.sig"),
        ]
    )  # fmt: skip
    assert verified == 0
    assert "2.1.0 (updater) for stable/linux-x86_64" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("product", "expected"),
    [
        pytest.param("updater", "holds no regular file FOLDER/install.sh", id="agent_as_updater"),
        pytest.param("agent", "holds no regular file bin/provibr-agent", id="bundle_as_agent"),
    ],
)
def test_a_build_of_the_other_product_is_not_signed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], product: str, expected: str
) -> None:
    if product == "updater":
        artifact = tmp_path / "agent.tar.gz"
        assert main(["build-demo-agent", "--version", "2.1.0", "--out", str(artifact)]) == 0
    else:
        artifact = _bundle(tmp_path / "bundle.tar.gz")
    assert _sign(tmp_path, artifact, "--product", product) == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "out/manifest.json").exists()


def test_a_bundle_whose_installer_is_not_executable_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path / "bundle.tar.gz", executable=False)
    assert _sign(tmp_path, bundle, "--product", "updater") == 2
    assert "install.sh is not executable" in capsys.readouterr().err
