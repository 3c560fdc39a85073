from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nachtwacht.release_cli import main
from signed_release.artifact import describe_artifact
from signed_release.keys import load_public_keys
from signed_release.manifest import parse_manifest
from signed_release.signature import check_signature

REPO = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nachtwacht.cli", "release", *args],
        capture_output=True,
        text=True,
        env=environment,
        check=False,
        # A command that reads a device to its end never returns: this turns it into a failure.
        timeout=120,
    )


def test_keygen_build_sign_verify_end_to_end(tmp_path: Path) -> None:
    assert run_cli("keygen", "--out", str(tmp_path / "keys")).returncode == 0
    artifact = tmp_path / "agent-1.5.0.tar.gz"
    assert run_cli("build-demo-agent", "--version", "1.5.0", "--out", str(artifact)).returncode == 0
    signed = run_cli(
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.5.0",
        "--channel", "stable", "--platform", "linux-x86_64", "--expires-in", "30d",
        "--manifest-version", "42", "--out", str(tmp_path / "out"), str(artifact),
    )  # fmt: skip
    assert signed.returncode == 0, signed.stderr
    manifest_bytes = (tmp_path / "out/manifest.json").read_bytes()
    trusted = load_public_keys([tmp_path / "keys/release.pub"])
    check_signature(manifest_bytes, (tmp_path / "out/manifest.sig").read_bytes(), trusted)
    manifest = parse_manifest(manifest_bytes)
    facts = describe_artifact(artifact)
    assert (manifest.manifest_version, manifest.agent_version) == (42, "1.5.0")
    assert (manifest.length, manifest.sha256) == (facts.length, facts.sha256)
    assert manifest.unpacked_size == facts.unpacked_size > 0
    assert (manifest.expires - manifest.issued_at).days == 30
    verified = run_cli(
        "verify", "--public-key", str(tmp_path / "keys/release.pub"), "--artifact", str(artifact),
        str(tmp_path / "out/manifest.json"), str(tmp_path / "out/manifest.sig"),
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    assert "artifact matches" in verified.stdout


def sign_default(tmp_path: Path, out: str, *extra: str, env: dict[str, str] | None = None) -> int:
    artifact = tmp_path / "a.tar.gz"
    if not artifact.exists():
        assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
        assert main(["build-demo-agent", "--version", "1.5.0", "--out", str(artifact)]) == 0
    argv = [
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.5.0",
        "--platform", "linux-x86_64", "--out", str(tmp_path / out), *extra, str(artifact),
    ]  # fmt: skip
    return main(argv)


def test_a_later_signing_gets_a_greater_manifest_version(tmp_path: Path) -> None:
    assert sign_default(tmp_path, "first") == 0
    assert sign_default(tmp_path, "second") == 0
    first = parse_manifest((tmp_path / "first/manifest.json").read_bytes())
    second = parse_manifest((tmp_path / "second/manifest.json").read_bytes())
    assert second.manifest_version > first.manifest_version


def test_signing_follows_the_fake_clock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NACHTWACHT_FAKE_CLOCK", "2026-10-25T00:50:00Z")
    assert sign_default(tmp_path, "out", "--expires-in", "12h") == 0
    manifest = json.loads((tmp_path / "out/manifest.json").read_bytes())
    assert manifest["issued_at"].startswith("2026-10-25T00:5")
    assert manifest["expires"].startswith("2026-10-25T12:5")
    assert "FAKE CLOCK" in capsys.readouterr().err


def test_allow_downgrade_is_signed_into_the_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_default(tmp_path, "out", "--allow-downgrade") == 0
    assert parse_manifest((tmp_path / "out/manifest.json").read_bytes()).allow_downgrade
    assert "publish-release --allow-downgrade" in capsys.readouterr().out


def test_a_plain_signature_says_nothing_of_downgrades(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_default(tmp_path, "out") == 0
    assert not parse_manifest((tmp_path / "out/manifest.json").read_bytes()).allow_downgrade
    assert "downgrade" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param(["--expires-in", "30"], "--expires-in: '30' is not a duration", id="no_unit"),
        pytest.param(["--expires-in=-1d"], "--expires-in: '-1d'", id="negative"),
        pytest.param(["--expires-in", "0d"], "--expires-in: '0d'", id="zero"),
        pytest.param(
            ["--expires-in", "1\u0663d"], "--expires-in: '1\u0663d'", id="arabic_indic_days"
        ),
        pytest.param(["--version", "1\u0663.0.0"], "'1\u0663.0.0' is not a version", id="v_arabic"),
        pytest.param(["--manifest-version", "0"], "'0' is not a positive integer", id="mv_zero"),
        pytest.param(
            ["--manifest-version", "²"], "version: '²' is not a positive integer", id="mv_super"
        ),
        pytest.param(
            ["--manifest-version", "٣"], "version: '٣' is not a positive integer", id="mv_arabic"
        ),
        pytest.param(
            ["--manifest-version", "1_0"], "version: '1_0' is not a positive integer", id="mv_1_0"
        ),
        pytest.param(["--platform", "Linux X86"], ": --platform: 'Linux X86'", id="bad_platform"),
        pytest.param(["--channel", ""], ": --channel: '' is not a name", id="empty_channel"),
        pytest.param(
            ["--manifest-version", str(2**53)],
            f": --manifest-version: {2**53} is out of range (expected 1..{2**53 - 1})",
            id="mv_huge",
        ),
    ],
)
def test_bad_sign_options_give_one_clear_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    assert sign_default(tmp_path, "out", *extra) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    # One form for every refusal: the command and its action first, as `nachtwacht control`.
    assert len(err.splitlines()) == 1, err
    assert err.startswith("nachtwacht release sign: "), err
    assert not (tmp_path / "out/manifest.json").exists()


def test_signing_something_that_is_not_an_agent_build_is_refused(tmp_path: Path) -> None:
    assert main(["keygen", "--out", str(tmp_path / "keys")]) == 0
    bogus = tmp_path / "bogus.tar.gz"
    bogus.write_bytes(b"not a tarball")
    result = run_cli(
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.5.0",
        "--platform", "linux-x86_64", "--out", str(tmp_path / "out"), str(bogus),
    )  # fmt: skip
    assert result.returncode == 2
    assert "bogus.tar.gz: not a tar.gz archive" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_world_readable_signing_key_is_refused_by_the_command(tmp_path: Path) -> None:
    assert sign_default(tmp_path, "before") == 0
    os.chmod(tmp_path / "keys/release.key", 0o640)
    assert sign_default(tmp_path, "after") == 2
    assert not (tmp_path / "after").exists()


def test_verify_refuses_an_artifact_that_was_not_signed(tmp_path: Path) -> None:
    assert sign_default(tmp_path, "out") == 0
    other = tmp_path / "other.tar.gz"
    assert main(["build-demo-agent", "--version", "1.6.0", "--out", str(other)]) == 0
    result = run_cli(
        "verify", "--public-key", str(tmp_path / "keys/release.pub"), "--artifact", str(other),
        str(tmp_path / "out/manifest.json"), str(tmp_path / "out/manifest.sig"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "is not the signed artifact" in result.stderr


def test_an_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["publish"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'publish'" in err
    assert err.startswith("nachtwacht release: "), err


@pytest.mark.parametrize("which", ["manifest", "signature"])
def test_verify_reads_a_manifest_or_signature_within_its_bound(tmp_path: Path, which: str) -> None:
    # A device (or a file far larger than any manifest) given by mistake is not read into
    # memory until the kernel kills the tool.
    assert sign_default(tmp_path, "out") == 0
    files = {
        "manifest": str(tmp_path / "out/manifest.json"),
        "signature": str(tmp_path / "out/manifest.sig"),
    }
    files[which] = "/dev/zero"
    result = run_cli(
        "verify", "--public-key", str(tmp_path / "keys/release.pub"),
        files["manifest"], files["signature"],
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("nachtwacht release verify: "), result.stderr
    assert "/dev/zero" in result.stderr and "at most" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


@pytest.mark.parametrize("kind", ["device", "fifo", "directory"])
def test_an_artifact_that_is_not_a_regular_file_is_refused_at_once(
    tmp_path: Path, kind: str
) -> None:
    # `sign` and `verify --artifact` hash the whole artifact: a device never ends and a named
    # pipe with no writer never opens. Both are refused before they are opened.
    assert sign_default(tmp_path, "out") == 0
    if kind == "device":
        artifact = "/dev/zero"
    elif kind == "fifo":
        artifact = str(tmp_path / "pipe")
        os.mkfifo(artifact)
    else:
        artifact = str(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    signed = run_cli(
        "sign", "--key", str(tmp_path / "keys/release.key"), "--version", "1.5.0",
        "--platform", "linux-x86_64", "--out", str(tmp_path / "again"), artifact,
    )  # fmt: skip
    verified = run_cli(
        "verify", "--public-key", str(tmp_path / "keys/release.pub"), "--artifact", artifact,
        str(tmp_path / "out/manifest.json"), str(tmp_path / "out/manifest.sig"),
    )  # fmt: skip
    for result, command in ((signed, "sign"), (verified, "verify")):
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"nachtwacht release {command}: {artifact}: is not a "), (
            result.stderr
        )
        assert "expected the build's .tar.gz" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_signing_never_replaces_a_release_already_in_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A second signing into the same --out (another version, a slip of the shell's history) would
    # silently replace the first release's manifest and signature.
    assert sign_default(tmp_path, "out") == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    capsys.readouterr()
    assert sign_default(tmp_path, "out", "--manifest-version", "7") == 2
    err = capsys.readouterr().err
    assert err.startswith("nachtwacht release sign: --out: "), err
    assert "manifest.json already exists (refusing to replace it" in err, err
    assert len(err.splitlines()) == 1, err
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before


def test_signing_into_a_file_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_default(tmp_path, "out") == 0
    capsys.readouterr()
    assert sign_default(tmp_path, "a.tar.gz") == 2
    err = capsys.readouterr().err
    assert err.startswith("nachtwacht release sign: --out: "), err
    assert "is not a folder" in err, err
    assert len(err.splitlines()) == 1, err


def test_signing_into_a_folder_that_cannot_be_made_is_refused_naming_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_default(tmp_path, "out") == 0
    capsys.readouterr()
    before = sorted(path.name for path in tmp_path.iterdir())
    # Under a file: no user, root included, can make a folder there.
    assert sign_default(tmp_path, "a.tar.gz/release") == 2
    err = capsys.readouterr().err
    assert err == (
        f"nachtwacht release sign: --out: {tmp_path / 'a.tar.gz/release'}: cannot make the folder"
        " (Not a directory)\n"
    )
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def test_keygen_into_a_folder_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    made = run_cli("keygen", "--out", str(tmp_path / "a-file/keys"))
    assert made.returncode == 2
    assert made.stderr == (
        f"nachtwacht release keygen: {tmp_path / 'a-file/keys'}: cannot make the folder"
        " (Not a directory)\n"
    )
    assert [path.name for path in tmp_path.iterdir()] == ["a-file"]
