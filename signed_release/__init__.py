"""The signed release format: manifest, detached Ed25519 signature, key files and key ids.

Used by the control plane (checking a release before publishing it) and the agent (the first step
of verifying an update). Import from here; the modules behind it are free to move.
"""

from __future__ import annotations

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
