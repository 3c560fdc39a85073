"""Key files (release keys and trust-root keys) and key ids.

`NAME.key` is the Ed25519 private key as unencrypted PKCS#8 PEM, mode 0600; `NAME.pub` is the
public key as SubjectPublicKeyInfo PEM. NAME is `release` for a key that signs release manifests
and `root` for a key that signs trust roots. A key id is the hex SHA-256 of the raw 32-byte public
key, so anyone holding the `.pub` file can compute it.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Iterable
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from signed_release.atomic_files import write_new_file
from signed_release.errors import KeyFileError
from signed_release.key_file import read_key_file

__all__ = [
    "PRIVATE_KEY_NAME",
    "PUBLIC_KEY_NAME",
    "RELEASE_KEY",
    "ROOT_KEY",
    "generate_key_files",
    "key_id",
    "load_private_key",
    "load_public_key",
    "load_public_keys",
]

RELEASE_KEY = "release"
ROOT_KEY = "root"
PRIVATE_KEY_NAME = f"{RELEASE_KEY}.key"
PUBLIC_KEY_NAME = f"{RELEASE_KEY}.pub"


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def generate_key_files(directory: Path, name: str = RELEASE_KEY) -> tuple[Path, Path, str]:
    """Write a new key pair `name.key` and `name.pub` into `directory`; returns (private path,
    public path, key id)."""
    if directory.exists() and not directory.is_dir():
        raise KeyFileError(
            f"{directory}: is not a folder (expected a folder for {name}.key and {name}.pub)"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise KeyFileError(f"{directory}: cannot make the folder ({exc.strerror or exc})") from exc
    private_path = directory / f"{name}.key"
    public_path = directory / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            raise KeyFileError(f"{path}: already exists (refusing to replace a {name} key)")
    private_key = Ed25519PrivateKey.generate()
    # Never replaced (a second keygen must not replace a key that releases were signed with).
    write_new_file(
        private_path,
        private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        mode=0o600,
    )
    public_key = private_key.public_key()
    write_new_file(
        public_path,
        public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
        mode=0o644,
    )
    return private_path, public_path, key_id(public_key)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """The signing key; refused when group or others may read it (as ssh refuses such keys)."""
    data = read_key_file(path)
    if data.lstrip().startswith(b"-----BEGIN PUBLIC KEY-----"):
        raise KeyFileError(f"{path}: holds a public key, expected the private .key file beside it")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(f"{path}: not an unencrypted PKCS#8 PEM private key ({exc})") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"{path}: holds a {type(key).__name__}, expected an Ed25519 key")
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise KeyFileError(
            f"{path}: mode {mode:04o} lets others read the private key (expected 0600; "
            f"run chmod 600 {path})"
        )
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    data = read_key_file(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as exc:
        raise KeyFileError(
            f"{path}: not a SubjectPublicKeyInfo PEM public key (expected a .pub file written by "
            "keygen or root-keygen)"
        ) from exc
    if not isinstance(key, Ed25519PublicKey):
        raise KeyFileError(f"{path}: holds a {type(key).__name__}, expected an Ed25519 key")
    return key


def load_public_keys(paths: Iterable[Path]) -> dict[str, Ed25519PublicKey]:
    """Trusted keys by key id. Several keys may be trusted at once (rotation)."""
    keys: dict[str, Ed25519PublicKey] = {}
    for path in paths:
        key = load_public_key(Path(path))
        keys[key_id(key)] = key
    return keys
