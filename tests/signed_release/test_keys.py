from __future__ import annotations

import hashlib
import os
import stat
import threading
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key

from signed_release.errors import KeyFileError
from signed_release.key_file import MAX_KEY_FILE_BYTES
from signed_release.keys import (
    generate_key_files,
    key_id,
    load_private_key,
    load_public_key,
    load_public_keys,
)


def test_keygen_writes_a_private_key_only_its_owner_can_read(tmp_path: Path) -> None:
    private_path, public_path, kid = generate_key_files(tmp_path / "keys")
    assert stat.S_IMODE(private_path.stat().st_mode) == 0o600
    assert private_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public_path.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert key_id(load_private_key(private_path).public_key()) == kid


def test_key_id_is_the_sha256_of_the_raw_public_key(tmp_path: Path) -> None:
    _, public_path, kid = generate_key_files(tmp_path)
    raw = load_public_key(public_path).public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    assert len(raw) == 32
    assert kid == hashlib.sha256(raw).hexdigest()


def test_keygen_never_replaces_an_existing_key(tmp_path: Path) -> None:
    private_path, _, _ = generate_key_files(tmp_path)
    before = private_path.read_bytes()
    with pytest.raises(KeyFileError, match="already exists"):
        generate_key_files(tmp_path)
    assert private_path.read_bytes() == before


def test_keygen_into_a_file_is_refused_naming_it(tmp_path: Path) -> None:
    # `--out` given a file (the build, say) said only "File exists".
    taken = tmp_path / "agent.tar.gz"
    taken.write_bytes(b"a build")
    with pytest.raises(KeyFileError, match=r"agent\.tar\.gz: is not a folder \(expected a folder"):
        generate_key_files(taken)
    assert taken.read_bytes() == b"a build"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.tar.gz"]


def test_a_private_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    private_path, _, _ = generate_key_files(tmp_path)
    os.chmod(private_path, 0o644)
    with pytest.raises(KeyFileError, match="mode 0644"):
        load_private_key(private_path)


def test_load_public_keys_maps_each_key_id(tmp_path: Path) -> None:
    _, first, first_id = generate_key_files(tmp_path / "a")
    _, second, second_id = generate_key_files(tmp_path / "b")
    assert set(load_public_keys([first, second])) == {first_id, second_id}


def test_a_file_that_is_not_a_public_key_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "release.pub"
    path.write_text("hello\n")
    with pytest.raises(KeyFileError, match=r"release\.pub: not a SubjectPublicKeyInfo"):
        load_public_keys([path])


def test_a_key_of_another_algorithm_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ec.pub"
    path.write_bytes(
        generate_private_key(SECP256R1())
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    with pytest.raises(KeyFileError, match="expected an Ed25519 key"):
        load_public_key(path)


def test_a_missing_key_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match=r"nowhere\.pub: cannot be read"):
        load_public_key(tmp_path / "nowhere.pub")


def test_a_key_file_over_the_bound_is_refused_naming_its_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.pub"
    path.write_bytes(b"-" * (MAX_KEY_FILE_BYTES + 1))
    with pytest.raises(KeyFileError, match=rf"huge\.pub: {MAX_KEY_FILE_BYTES + 1} bytes is too"):
        load_public_key(path)


def test_a_key_file_with_no_size_is_read_no_further_than_the_bound(tmp_path: Path) -> None:
    """A pipe or a device (`--release-public-key /dev/zero`, a process substitution fed the wrong
    thing) reports no size: it is read up to the bound and refused there, never read whole."""
    fifo = tmp_path / "endless.pub"
    os.mkfifo(fifo)
    sent = b"-" * (4 * MAX_KEY_FILE_BYTES)

    def feed() -> None:
        try:
            with fifo.open("wb") as pipe:
                pipe.write(sent)
        except BrokenPipeError:
            pass  # the reader stopped at the bound and closed its end: what is expected

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        with pytest.raises(KeyFileError, match=rf"endless\.pub: more than {MAX_KEY_FILE_BYTES}"):
            load_public_key(fifo)
    finally:
        writer.join(timeout=10)
    assert not writer.is_alive()
