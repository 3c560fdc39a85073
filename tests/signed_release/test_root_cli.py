"""The trust-root commands of the release tool, run as an operator would: files in a directory, no
network, one command at a time."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from signed_release.cli import main
from signed_release.keys import key_id, load_public_key
from signed_release.trust_root import (
    next_trust_root,
    read_trust_root,
    root_signers,
    self_signed_root,
)

REPO = Path(__file__).resolve().parents[2]


class Desk:
    """An operator's directory: root keys r1…, release keys rel1…, and root files."""

    def __init__(self, path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.path = path
        self.capsys = capsys

    def run(self, *args: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main([str(arg) for arg in args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def ok(self, *args: str) -> str:
        code, out, err = self.run(*args)
        assert code == 0, err
        return out

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def root_key(self, name: str) -> str:
        if not (self.path / name / "root.key").exists():
            self.ok("root-keygen", "--out", str(self.path / name))
        return str(self.path / name / "root")

    def release_key(self, name: str) -> str:
        if not (self.path / name / "release.key").exists():
            self.ok("keygen", "--out", str(self.path / name))
        return str(self.path / name / "release")

    def init_v1(self, out: str = "v1.json", *extra: str) -> Path:
        roots = [self.root_key(name) for name in ("r1", "r2", "r3")]
        self.ok(
            "root-init", *(arg for root in roots for arg in ("--root-key", root + ".pub")),
            "--threshold", "2", "--release-key", self.release_key("rel1") + ".pub",
            "--expires-in", "365d", "--out", str(self / out), *extra,
        )  # fmt: skip
        return self / out

    def sign(self, file: Path, *keys: str) -> None:
        for key in keys:
            self.ok("root-sign", "--key", key + ".key", str(file))


@pytest.fixture
def desk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Desk:
    return Desk(tmp_path, capsys)


@pytest.fixture
def signed_v1(desk: Desk) -> Path:
    v1 = desk.init_v1()
    desk.sign(v1, desk.root_key("r1"), desk.root_key("r2"))
    return v1


def test_a_whole_rotation_by_the_command_line_without_a_network(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: Any, **kwargs: Any) -> socket.socket:
        raise AssertionError("a root command opened a socket")

    monkeypatch.setattr(socket, "socket", no_network)
    r1, r2, r3 = (desk.root_key(name) for name in ("r1", "r2", "r3"))
    rel1, rel2 = desk.release_key("rel1"), desk.release_key("rel2")
    v1 = desk.init_v1()
    desk.sign(v1, r1, r2)
    out = desk.ok("root-show", str(v1))
    assert "its own root keys: 2 of 2 needed signatures, threshold met" in out
    assert out.splitlines()[-1] == "trusted: an agent given it directly would take up v1"

    v2 = desk / "v2.json"
    out = desk.ok(
        "root-next", "--previous", str(v1), "--release-key", rel2 + ".pub",
        "--expires-in", "365d", "--out", str(v2),
    )  # fmt: skip
    rel1_id = key_id(load_public_key(Path(rel1 + ".pub")))
    assert f"release key dropped: {rel1_id}" in out
    desk.sign(v2, r1, r3)
    out = desk.ok("root-show", "--previous", str(v1), str(v2))
    assert "v1's root keys: 2 of 2 needed signatures, threshold met" in out
    assert out.splitlines()[-1] == "trusted: a holder of v1 would take up v2"

    held = next_trust_root(self_signed_root(v1.read_bytes()), v2.read_bytes())
    assert set(held.release_keys) == {key_id(load_public_key(Path(rel2 + ".pub")))}


def test_one_signature_of_a_threshold_of_two_is_not_trusted(desk: Desk) -> None:
    v1 = desk.init_v1()
    desk.sign(v1, desk.root_key("r1"))
    code, out, _ = desk.run("root-show", str(v1))
    assert code == 1
    assert "its own root keys: 1 of 2 needed signatures, threshold NOT met" in out
    assert out.splitlines()[-1] == (
        "not trusted: trust root v1: 1 valid signatures by its own root keys (v1), 2 needed"
    )


def test_new_root_keys_cannot_vouch_for_themselves(desk: Desk, signed_v1: Path) -> None:
    r4, r5 = desk.root_key("r4"), desk.root_key("r5")
    v2 = desk / "v2.json"
    desk.ok(
        "root-next", "--previous", str(signed_v1), "--root-key", r4 + ".pub",
        "--root-key", r5 + ".pub", "--expires-in", "365d", "--out", str(v2),
    )  # fmt: skip
    desk.sign(v2, r4, r5)
    code, out, _ = desk.run("root-show", "--previous", str(signed_v1), str(v2))
    assert code == 1
    assert "v1's root keys: 0 of 2 needed signatures, threshold NOT met" in out
    assert "its own root keys: 2 of 2 needed signatures, threshold met" in out
    assert out.splitlines()[-1].startswith("not trusted: trust root v2: 0 valid signatures by the")


def test_the_old_root_keys_alone_cannot_rotate_to_keys_that_never_signed(
    desk: Desk, signed_v1: Path
) -> None:
    r4, r5 = desk.root_key("r4"), desk.root_key("r5")
    v2 = desk / "v2.json"
    desk.ok(
        "root-next", "--previous", str(signed_v1), "--root-key", r4 + ".pub",
        "--root-key", r5 + ".pub", "--expires-in", "365d", "--out", str(v2),
    )  # fmt: skip
    code, out, _ = desk.run("root-sign", "--key", desk.root_key("r1") + ".key", str(v2))
    assert code == 0
    assert "a key v2 does not name: counts only if it is a root key of v1" in out
    desk.sign(v2, desk.root_key("r2"))
    code, out, _ = desk.run("root-show", "--previous", str(signed_v1), str(v2))
    assert code == 1
    assert "its own root keys: 0 of 2 needed signatures, threshold NOT met" in out


def test_a_version_that_skips_one_is_not_trusted(desk: Desk, signed_v1: Path) -> None:
    v2, v3 = desk / "v2.json", desk / "v3.json"
    desk.ok("root-next", "--previous", str(signed_v1), "--expires-in", "30d", "--out", str(v2))
    desk.ok("root-next", "--previous", str(v2), "--expires-in", "30d", "--out", str(v3))
    desk.sign(v3, desk.root_key("r1"), desk.root_key("r2"))
    code, out, _ = desk.run("root-show", "--previous", str(signed_v1), str(v3))
    assert code == 1
    assert "not trusted: trust root v3 skips versions: v2 is the next to verify" in out


def test_a_root_shown_after_its_expiry_is_not_trusted(
    desk: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NACHTWACHT_FAKE_CLOCK", "2026-12-01T00:00:00Z")
    v1 = desk / "v1.json"
    roots = [desk.root_key(name) for name in ("r1", "r2")]
    desk.ok(
        "root-init", "--root-key", roots[0] + ".pub", "--root-key", roots[1] + ".pub",
        "--threshold", "1", "--release-key", desk.release_key("rel1") + ".pub",
        "--expires-in", "2d", "--out", str(v1),
    )  # fmt: skip
    desk.sign(v1, roots[0])
    assert desk.run("root-show", str(v1))[0] == 0
    monkeypatch.setenv("NACHTWACHT_FAKE_CLOCK", "2026-12-04T00:00:00Z")
    code, out, _ = desk.run("root-show", str(v1))
    assert code == 1
    assert "expires 2026-12-03T00:00:00Z (EXPIRED 1 day ago)" in out
    assert out.splitlines()[-1].startswith("not trusted: trust root v1 expired at 2026-12-03")


# -- migration from trusted-key files -------------------------------------------------------------


def test_version_one_signed_by_the_current_release_key_is_taken_up_by_key_file_agents(
    desk: Desk, signed_v1: Path
) -> None:
    rel1 = desk.release_key("rel1")
    code, out, _ = desk.run("root-show", "--trusted-key", rel1 + ".pub", str(signed_v1))
    assert code == 1
    assert "trusted release keys: 0 of 1 needed signatures, threshold NOT met" in out
    assert "not signed by any release key this host trusts" in out

    out = desk.ok("root-sign", "--key", rel1 + ".key", str(signed_v1))
    assert "a release key: counts for agents moving from trusted-key files" in out
    out = desk.ok("root-show", "--trusted-key", rel1 + ".pub", str(signed_v1))
    assert out.splitlines()[-1] == "trusted: an agent on these trusted-key files would take up v1"


def test_root_init_with_a_migration_key_signs_version_one_at_once(desk: Desk) -> None:
    rel1 = desk.release_key("rel1")
    v1 = desk.init_v1("v1.json", "--migration-key", rel1 + ".key")
    desk.sign(v1, desk.root_key("r1"), desk.root_key("r2"))
    assert desk.run("root-show", "--trusted-key", rel1 + ".pub", str(v1))[0] == 0


def test_a_release_key_the_agent_does_not_trust_does_not_migrate_it(
    desk: Desk, signed_v1: Path
) -> None:
    desk.sign(signed_v1, desk.release_key("rel1"))
    other = desk.release_key("other")
    code, out, _ = desk.run("root-show", "--trusted-key", other + ".pub", str(signed_v1))
    assert code == 1
    assert "not signed by any release key this host trusts" in out


# -- keys and files -------------------------------------------------------------------------------


def test_root_keygen_writes_a_private_key_only_its_owner_reads_and_refuses_to_replace_it(
    desk: Desk,
) -> None:
    out = desk.ok("root-keygen", "--out", str(desk / "r1"))
    private = desk / "r1/root.key"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert f"key id {key_id(load_public_key(desk / 'r1/root.pub'))}" in out
    assert "offline" in out
    before = private.read_bytes()
    code, _, err = desk.run("root-keygen", "--out", str(desk / "r1"))
    assert code == 2
    assert "root.key: already exists (refusing to replace a root key)" in err
    assert err.startswith("nachtwacht release root-keygen: "), err
    assert private.read_bytes() == before


def test_root_sign_adds_a_signature_in_place_keeping_the_mode_and_the_others(
    desk: Desk, signed_v1: Path
) -> None:
    os.chmod(signed_v1, 0o640)
    out = desk.ok("root-sign", "--key", desk.root_key("r3") + ".key", str(signed_v1))
    assert "a root key of v1" in out
    assert "it now carries 3 signatures; its own root keys: 3 of 2 signed" in out
    assert stat.S_IMODE(signed_v1.stat().st_mode) == 0o640
    assert root_signers(*[self_signed_root(signed_v1.read_bytes())] * 2) == {
        key_id(load_public_key(desk / f"{name}/root.pub")) for name in ("r1", "r2", "r3")
    }
    assert [p.name for p in desk.path.iterdir() if p.is_file()] == ["v1.json"]


def test_signing_again_with_the_same_key_renews_its_one_signature(
    desk: Desk, signed_v1: Path
) -> None:
    out = desk.ok("root-sign", "--key", desk.root_key("r1") + ".key", str(signed_v1))
    assert "it now carries 2 signatures; its own root keys: 2 of 2 signed" in out


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("r1/root.pub", "root.pub: holds a public key, expected the private", id="pub"),
        pytest.param(
            "v1.json", "v1.json: not an unencrypted PKCS#8 PEM private key", id="not_a_key"
        ),
        pytest.param("nowhere.key", "nowhere.key: cannot be read", id="missing"),
    ],
)
def test_root_sign_with_a_wrong_key_file_changes_nothing(
    desk: Desk, signed_v1: Path, key: str, expected: str
) -> None:
    before = signed_v1.read_bytes()
    code, _, err = desk.run("root-sign", "--key", str(desk / key), str(signed_v1))
    assert code == 2
    assert expected in err
    assert "Traceback" not in err
    assert err.startswith("nachtwacht release root-sign: "), err
    assert signed_v1.read_bytes() == before


def test_root_sign_with_a_readable_private_key_is_refused(desk: Desk, signed_v1: Path) -> None:
    os.chmod(desk / "r3/root.key", 0o644)
    before = signed_v1.read_bytes()
    code, _, err = desk.run("root-sign", "--key", str(desk / "r3/root.key"), str(signed_v1))
    assert code == 2
    assert "root.key: mode 0644 lets others read the private key" in err
    assert signed_v1.read_bytes() == before


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b'{"manifest_version": 42}', id="a_manifest"),
        pytest.param(b"not json at all", id="garbage"),
        pytest.param(b"", id="empty"),
    ],
)
def test_root_sign_of_a_file_that_is_not_a_trust_root_is_refused(
    desk: Desk, content: bytes
) -> None:
    target = desk / "manifest.json"
    target.write_bytes(content)
    code, _, err = desk.run("root-sign", "--key", desk.root_key("r1") + ".key", str(target))
    assert code == 2
    assert f"FILE {target}: trust root: not TUF root metadata" in err
    assert target.read_bytes() == content


def test_root_show_of_a_file_that_is_not_a_trust_root_is_a_usage_error(desk: Desk) -> None:
    target = desk / "x.json"
    target.write_bytes(b"[]")
    code, _, err = desk.run("root-show", str(target))
    assert code == 2
    assert f"FILE {target}: trust root: not TUF root metadata" in err


def test_root_init_never_replaces_an_existing_file(desk: Desk, signed_v1: Path) -> None:
    before = signed_v1.read_bytes()
    code, _, err = desk.run(
        "root-init", "--root-key", desk.root_key("r1") + ".pub", "--threshold", "1",
        "--release-key", desk.release_key("rel1") + ".pub", "--expires-in", "365d",
        "--out", str(signed_v1),
    )  # fmt: skip
    assert code == 2
    assert f"--out: {signed_v1} already exists (refusing to replace it)" in err
    assert signed_v1.read_bytes() == before


@pytest.mark.parametrize("command", ["root-init", "root-next"])
def test_an_out_file_that_cannot_be_written_is_named_by_its_flag(
    desk: Desk, signed_v1: Path, command: str
) -> None:
    """A directory that does not exist: the refusal names `--out` and the file asked for, never the
    temporary file it would have been written through, and leaves nothing behind."""
    out = desk / "no-such-directory" / "v.json"
    if command == "root-init":
        args = [
            "--root-key", desk.root_key("r1") + ".pub", "--threshold", "1",
            "--release-key", desk.release_key("rel1") + ".pub",
        ]  # fmt: skip
    else:
        args = ["--previous", str(signed_v1)]
    code, out_text, err = desk.run(command, *args, "--expires-in", "365d", "--out", str(out))
    assert code == 2
    assert out_text == ""
    assert err.strip() == (
        f"nachtwacht release {command}: --out: cannot write {out} (No such file or directory)"
    )
    assert not out.parent.exists()


def test_root_next_never_replaces_an_existing_file(desk: Desk, signed_v1: Path) -> None:
    taken = desk / "v2.json"
    taken.write_bytes(b"someone else's\n")
    code, _, err = desk.run(
        "root-next", "--previous", str(signed_v1), "--expires-in", "365d", "--out", str(taken)
    )
    assert code == 2
    assert "already exists (refusing to replace it)" in err
    assert taken.read_bytes() == b"someone else's\n"


def test_root_next_keeps_the_roles_not_given_and_is_unsigned(desk: Desk, signed_v1: Path) -> None:
    v2 = desk / "v2.json"
    desk.ok(
        "root-next", "--previous", str(signed_v1), "--threshold", "3",
        "--expires-in", "365d", "--out", str(v2),
    )  # fmt: skip
    before, after = read_trust_root(signed_v1.read_bytes()), read_trust_root(v2.read_bytes())
    assert after.version == 2
    assert after.root_key_ids == before.root_key_ids
    assert after.release_keys == before.release_keys
    assert after.root_threshold == 3
    assert "it now carries 1 signature;" in desk.ok(
        "root-sign", "--key", desk.root_key("r1") + ".key", str(v2)
    )


# -- bad options ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expires_in", "expected"),
    [
        pytest.param("0d", "--expires-in: '0d' is not a duration", id="zero"),
        pytest.param("-1d", "--expires-in: '-1d' is not a duration", id="negative"),
        pytest.param("1y", "--expires-in: '1y' is not a duration", id="years_unit"),
        pytest.param("12m", "--expires-in: '12m' is less than a day", id="minutes_for_months"),
        pytest.param("23h", "--expires-in: '23h' is less than a day", id="hours"),
        pytest.param("1828d", "--expires-in: '1828d' is more than 5 years", id="past_five_years"),
        pytest.param("999999d", "--expires-in: '999999d' is more than 5 years", id="forever"),
        pytest.param(
            "99999999d",
            "--expires-in: '99999999d' is not a duration (expected a whole number from 1 to 999999",
            id="past_the_number_it_reads",
        ),
    ],
)
def test_an_absurd_lifetime_is_refused(desk: Desk, expires_in: str, expected: str) -> None:
    code, _, err = desk.run(
        "root-init", "--root-key", desk.root_key("r1") + ".pub", "--threshold", "1",
        "--release-key", desk.release_key("rel1") + ".pub", f"--expires-in={expires_in}",
        "--out", str(desk / "v1.json"),
    )  # fmt: skip
    assert code == 2
    assert expected in err
    assert not (desk / "v1.json").exists()


def test_the_longest_lifetime_allowed_is_accepted(desk: Desk) -> None:
    desk.ok(
        "root-init", "--root-key", desk.root_key("r1") + ".pub", "--threshold", "1",
        "--release-key", desk.release_key("rel1") + ".pub", "--expires-in", "1827d",
        "--out", str(desk / "v1.json"),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("threshold", "expected"),
    [
        pytest.param("0", "--threshold: 0, expected 1 to 2 (the number of root keys)", id="zero"),
        pytest.param("3", "--threshold: 3, expected 1 to 2 (the number of root keys)", id="above"),
        pytest.param("-1", "argument --threshold: '-1' is not a whole number", id="negative"),
        # Digits `int` would take: a signing machine reads only what a person types as a number.
        pytest.param("²", "argument --threshold: '²' is not a whole number", id="superscript"),
        pytest.param("٢", "argument --threshold: '٢' is not a whole number", id="arabic_digit"),
    ],
)
def test_a_threshold_no_signing_could_meet_is_refused(
    desk: Desk, threshold: str, expected: str
) -> None:
    code, _, err = desk.run(
        "root-init", "--root-key", desk.root_key("r1") + ".pub",
        "--root-key", desk.root_key("r2") + ".pub", f"--threshold={threshold}",
        "--release-key", desk.release_key("rel1") + ".pub", "--expires-in", "365d",
        "--out", str(desk / "v1.json"),
    )  # fmt: skip
    assert code == 2
    assert expected in err
    assert not (desk / "v1.json").exists()


def test_root_next_with_fewer_root_keys_than_the_kept_threshold_asks_for_one(
    desk: Desk, signed_v1: Path
) -> None:
    code, _, err = desk.run(
        "root-next", "--previous", str(signed_v1), "--root-key", desk.root_key("r4") + ".pub",
        "--expires-in", "365d", "--out", str(desk / "v2.json"),
    )  # fmt: skip
    assert code == 2
    assert "--threshold: 2 (kept from v1; give --threshold), expected 1 to 1" in err


def test_one_key_given_twice_is_refused(desk: Desk) -> None:
    r1 = desk.root_key("r1") + ".pub"
    copy = desk / "copy.pub"
    copy.write_bytes(Path(r1).read_bytes())
    code, _, err = desk.run(
        "root-init", "--root-key", r1, "--root-key", str(copy), "--threshold", "2",
        "--release-key", desk.release_key("rel1") + ".pub", "--expires-in", "365d",
        "--out", str(desk / "v1.json"),
    )  # fmt: skip
    assert code == 2
    assert f"--root-key: {copy} is the same key as {r1}" in err


@pytest.mark.parametrize("command", ["root-init", "root-next"])
def test_a_root_key_that_is_also_a_release_key_is_refused(
    desk: Desk, signed_v1: Path, command: str
) -> None:
    r1 = desk.root_key("r1") + ".pub"
    if command == "root-init":
        args = ["--root-key", r1, "--threshold", "1"]
    else:
        args = ["--previous", str(signed_v1)]
    code, _, err = desk.run(
        command, *args, "--release-key", r1, "--expires-in", "365d", "--out", str(desk / "x.json")
    )
    assert code == 2
    assert "is a root key too (expected separate keys" in err
    assert not (desk / "x.json").exists()


def test_root_show_exit_status_comes_through_the_nachtwacht_command(
    desk: Desk, signed_v1: Path
) -> None:
    other = desk.release_key("other")

    def show(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nachtwacht.cli", "release", "root-show", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            check=False,
        )

    assert show(str(signed_v1)).returncode == 0
    refused = show("--trusted-key", other + ".pub", str(signed_v1))
    assert refused.returncode == 1
    assert refused.stdout.splitlines()[-1].startswith("not trusted: trust root v1: not signed")


def test_a_signature_by_a_key_named_nowhere_is_shown_as_such(desk: Desk, signed_v1: Path) -> None:
    stranger = desk.release_key("stranger")
    out = desk.ok("root-sign", "--key", stranger + ".key", str(signed_v1))
    assert "a key v1 does not name: counts only if agents moving from trusted-key files" in out
    out = desk.ok("root-show", str(signed_v1))
    assert "signatures: 3\n" in out
    assert "  1 by keys named neither here nor in what is held" in out
    out = desk.ok("root-show", "--trusted-key", stranger + ".pub", str(signed_v1))
    assert "named neither" not in out


def test_signatures_that_no_longer_verify_are_shown_as_such(desk: Desk, signed_v1: Path) -> None:
    document = json.loads(signed_v1.read_text())
    document["signed"]["expires"] = "2099-01-01T00:00:00Z"  # changed after both signed it
    signed_v1.write_text(json.dumps(document))
    code, out, _ = desk.run("root-show", str(signed_v1))
    assert code == 1
    assert "signatures: 2\n" in out
    assert "  2 by keys named here that do not verify (the file changed after" in out
    assert "named neither" not in out
