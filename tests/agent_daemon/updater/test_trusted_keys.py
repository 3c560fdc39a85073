"""The agent's trusted release keys: checked and named at start without `cryptography`, built
into key objects only when an update verifies — and the same keys, ids and
refusals as `signed_release`'s own loader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed448 import Ed448PrivateKey

from agent_daemon.errors import ConfigError
from agent_daemon.updater.trusted_keys import TrustedKeys, read_trusted_keys
from agent_daemon.updater.updater_settings import UpdaterSettings
from agent_daemon.updater.updater_settings import trusted_keys as as_trusted_keys
from signed_release.errors import KeyFileError, UnknownKey
from signed_release.key_file import MAX_KEY_FILE_BYTES
from signed_release.keys import generate_key_files, load_private_key, load_public_keys
from signed_release.signature import check_signature, sign_manifest
from tests.worlds.processes import REPO_ROOT


@pytest.fixture
def key_pair(tmp_path: Path) -> tuple[Path, Path]:
    private_path, public_path, _ = generate_key_files(tmp_path / "keys")
    return private_path, public_path


def test_the_key_ids_are_signed_release_s_key_ids(
    key_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    _, other_public, _ = generate_key_files(tmp_path / "other")
    read = read_trusted_keys([key_pair[1], other_public])
    assert sorted(read) == sorted(load_public_keys([key_pair[1], other_public]))


def test_a_signature_checks_against_the_keys_built_on_first_use(
    key_pair: tuple[Path, Path],
) -> None:
    private_path, public_path = key_pair
    manifest = b'{"agent_version": "1.2.3"}'
    signature = sign_manifest(manifest, load_private_key(private_path))
    assert check_signature(manifest, signature, read_trusted_keys([public_path]))


def test_a_signature_by_a_key_not_read_is_refused(
    key_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    other_private, _, _ = generate_key_files(tmp_path / "other")
    manifest = b'{"agent_version": "1.2.3"}'
    signature = sign_manifest(manifest, load_private_key(other_private))
    with pytest.raises(UnknownKey):
        check_signature(manifest, signature, read_trusted_keys([key_pair[1]]))


def _public_pem(private: object) -> bytes:
    return private.public_key().public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        pytest.param(b"not a key\n", "not a SubjectPublicKeyInfo PEM", id="not_pem"),
        pytest.param(
            b"-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n",
            "not a SubjectPublicKeyInfo PEM",
            id="bad_base64",
        ),
        pytest.param(
            _public_pem(generate_private_key(SECP256R1())),
            "expected an Ed25519 key",
            id="ec_p256_key",
        ),
        pytest.param(
            _public_pem(Ed448PrivateKey.generate()), "expected an Ed25519 key", id="ed448_key"
        ),
    ],
)
def test_a_file_that_is_not_an_ed25519_public_key_is_refused_at_start_naming_it(
    tmp_path: Path, content: bytes, expected: str
) -> None:
    path = tmp_path / "release.pub"
    path.write_bytes(content)
    with pytest.raises(KeyFileError, match=expected) as raised:
        read_trusted_keys([path])
    assert str(path) in str(raised.value)


def test_a_key_file_over_the_bound_or_missing_is_refused_at_start_naming_it(
    tmp_path: Path,
) -> None:
    huge = tmp_path / "huge.pub"
    huge.write_bytes(b"-" * (MAX_KEY_FILE_BYTES + 1))
    with pytest.raises(KeyFileError, match=rf"huge\.pub: {MAX_KEY_FILE_BYTES + 1} bytes is too"):
        read_trusted_keys([huge])
    with pytest.raises(KeyFileError, match=r"nowhere\.pub: cannot be read"):
        read_trusted_keys([tmp_path / "nowhere.pub"])


def test_two_key_blocks_in_one_file_are_refused(
    key_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    path = tmp_path / "two.pub"
    path.write_bytes(key_pair[1].read_bytes() * 2)
    with pytest.raises(KeyFileError, match="not a SubjectPublicKeyInfo PEM"):
        read_trusted_keys([path])


def test_a_key_id_that_does_not_match_its_key_is_refused() -> None:
    with pytest.raises(ValueError, match="not the key id"):
        TrustedKeys({"00" * 32: b"\x01" * 32})


def test_settings_take_key_objects_a_caller_built_and_refuse_what_is_not_keys(
    key_pair: tuple[Path, Path],
) -> None:
    loaded = load_public_keys([key_pair[1]])
    assert as_trusted_keys(loaded) == read_trusted_keys([key_pair[1]])
    with pytest.raises(ValueError, match="by key id"):
        as_trusted_keys([key_pair[1]])


def test_updater_settings_without_keys_or_a_trust_root_are_refused(
    key_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    fields = {
        "install_root": tmp_path / "install",
        "state_dir": tmp_path / "state",
        "platform": "linux-x86_64",
        "channel": "stable",
        "health_command": ("true",),
    }
    with pytest.raises(ConfigError, match="trusted_keys: found none and no trust_root_file"):
        UpdaterSettings(**fields, trusted_keys={})
    held = UpdaterSettings(**fields, trust_root_file=tmp_path / "state" / "trust_root.json")
    assert not held.trusted_keys


def test_reading_the_keys_does_not_import_cryptography(key_pair: tuple[Path, Path]) -> None:
    script = (
        "import json, sys\n"
        "from agent_daemon.updater.trusted_keys import read_trusted_keys\n"
        f"keys = read_trusted_keys([{str(key_pair[1])!r}])\n"
        "before = 'cryptography' in sys.modules\n"
        "keys[next(iter(keys))]\n"
        "print(json.dumps([before, 'cryptography' in sys.modules]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    # Not before the first look-up; then it is built.
    assert json.loads(result.stdout) == [False, True]
