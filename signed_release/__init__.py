"""The signed release format: manifest, detached Ed25519 signature, key files and key ids.

Used by the control plane (checking a release before publishing it) and the agent (the first step
of verifying an update). Import from here; the modules behind it are free to move.

Each name is loaded from its module on first use (PEP 562), so a program that needs only
`version_key` — the agent's idle minute — does not hold the signing and unpacking code (and
`cryptography`) in memory until an update runs (issue 16: the agent's footprint).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from signed_release.artifact import AGENT_ENTRY_POINT, ArtifactFacts, describe_artifact
    from signed_release.build_archive import (
        MAX_MEMBERS,
        BuildEntry,
        BuildRefused,
        lint_build,
        unpack_build,
    )
    from signed_release.errors import (
        ArtifactError,
        BadSignature,
        DuplicateField,
        InvalidField,
        KeyFileError,
        MalformedManifest,
        MalformedSignature,
        ManifestError,
        ReleaseError,
        SignatureError,
        UnknownKey,
    )
    from signed_release.keys import (
        PRIVATE_KEY_NAME,
        PUBLIC_KEY_NAME,
        generate_key_files,
        key_id,
        load_private_key,
        load_public_key,
        load_public_keys,
    )
    from signed_release.manifest import (
        ARTIFACT_FORMAT,
        Manifest,
        format_instant,
        parse_instant,
        parse_manifest,
    )
    from signed_release.signature import check_signature, sign_manifest
    from signed_release.versions import is_valid_version, version_key

# Where each public name lives; `__getattr__` imports that module the first time it is asked for.
_HOMES: dict[str, str] = {
    "AGENT_ENTRY_POINT": "signed_release.artifact",
    "ARTIFACT_FORMAT": "signed_release.manifest",
    "ArtifactError": "signed_release.errors",
    "ArtifactFacts": "signed_release.artifact",
    "BadSignature": "signed_release.errors",
    "BuildEntry": "signed_release.build_archive",
    "BuildRefused": "signed_release.build_archive",
    "DuplicateField": "signed_release.errors",
    "InvalidField": "signed_release.errors",
    "KeyFileError": "signed_release.errors",
    "MAX_MEMBERS": "signed_release.build_archive",
    "MalformedManifest": "signed_release.errors",
    "MalformedSignature": "signed_release.errors",
    "Manifest": "signed_release.manifest",
    "ManifestError": "signed_release.errors",
    "PRIVATE_KEY_NAME": "signed_release.keys",
    "PUBLIC_KEY_NAME": "signed_release.keys",
    "ReleaseError": "signed_release.errors",
    "SignatureError": "signed_release.errors",
    "UnknownKey": "signed_release.errors",
    "check_signature": "signed_release.signature",
    "describe_artifact": "signed_release.artifact",
    "format_instant": "signed_release.manifest",
    "generate_key_files": "signed_release.keys",
    "is_valid_version": "signed_release.versions",
    "key_id": "signed_release.keys",
    "lint_build": "signed_release.build_archive",
    "load_private_key": "signed_release.keys",
    "load_public_key": "signed_release.keys",
    "load_public_keys": "signed_release.keys",
    "parse_instant": "signed_release.manifest",
    "parse_manifest": "signed_release.manifest",
    "sign_manifest": "signed_release.signature",
    "unpack_build": "signed_release.build_archive",
    "version_key": "signed_release.versions",
}

__all__ = [
    "AGENT_ENTRY_POINT",
    "ARTIFACT_FORMAT",
    "MAX_MEMBERS",
    "PRIVATE_KEY_NAME",
    "PUBLIC_KEY_NAME",
    "ArtifactError",
    "ArtifactFacts",
    "BadSignature",
    "BuildEntry",
    "BuildRefused",
    "DuplicateField",
    "InvalidField",
    "KeyFileError",
    "MalformedManifest",
    "MalformedSignature",
    "Manifest",
    "ManifestError",
    "ReleaseError",
    "SignatureError",
    "UnknownKey",
    "check_signature",
    "describe_artifact",
    "format_instant",
    "generate_key_files",
    "is_valid_version",
    "key_id",
    "lint_build",
    "load_private_key",
    "load_public_key",
    "load_public_keys",
    "parse_instant",
    "parse_manifest",
    "sign_manifest",
    "unpack_build",
    "version_key",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'signed_release' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
