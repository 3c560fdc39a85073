"""Signed releases for tests: real Ed25519 keys, real demo-agent builds, real manifests."""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from signed_release import Manifest, describe_artifact, key_id, sign_manifest
from signed_release.demo_agent import Fault, build_demo_agent


@dataclass(frozen=True, kw_only=True)
class Release:
    manifest: Manifest
    manifest_bytes: bytes
    signature: bytes
    artifact: bytes

    @property
    def version(self) -> str:
        return self.manifest.agent_version


@dataclass(kw_only=True)
class ReleaseFactory:
    """Builds and signs releases with one pinned key."""

    workdir: Path
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    issued_at: datetime = field(
        default_factory=lambda: datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    )

    @property
    def trusted(self) -> dict[str, Ed25519PublicKey]:
        public = self.key.public_key()
        return {key_id(public): public}

    def artifact(self, version: str, fault: Fault = "none") -> bytes:
        path = self.workdir / f"build-{version}-{fault}.tar.gz"
        if not path.exists():
            build_demo_agent(path, version=version, fault=fault)
        return path.read_bytes()

    def sign(
        self,
        artifact: bytes,
        *,
        version: str,
        manifest_version: int,
        platform: str = "linux-x86_64",
        channel: str = "stable",
        expires_in: timedelta = timedelta(days=30),
        issued_at: datetime | None = None,
        allow_downgrade: bool = False,
        unpacked_size: int | None = None,
        key: Ed25519PrivateKey | None = None,
    ) -> Release:
        path = self.workdir / f"sign-{hashlib.sha256(artifact).hexdigest()}.tar.gz"
        path.write_bytes(artifact)
        facts = describe_artifact(path) if unpacked_size is None else None
        issued = issued_at or self.issued_at
        manifest = Manifest(
            manifest_version=manifest_version,
            issued_at=issued,
            expires=issued + expires_in,
            channel=channel,
            platform=platform,
            agent_version=version,
            length=len(artifact),
            sha256=hashlib.sha256(artifact).hexdigest(),
            unpacked_size=facts.unpacked_size if facts else unpacked_size or 0,
            allow_downgrade=allow_downgrade,
        )
        data = manifest.to_bytes()
        return Release(
            manifest=manifest,
            manifest_bytes=data,
            signature=sign_manifest(data, key or self.key),
            artifact=artifact,
        )

    def release(
        self, version: str, manifest_version: int, fault: Fault = "none", **options: object
    ) -> Release:
        return self.sign(
            self.artifact(version, fault),
            version=version,
            manifest_version=manifest_version,
            **options,  # type: ignore[arg-type]
        )


def evil_archive(member_name: str, *, link_to: str | None = None) -> bytes:
    """A tar.gz holding a valid agent entry point plus one hostile member."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        script = b"#!/bin/sh\necho 6.6.6\n"
        info = tarfile.TarInfo("bin/provibr-agent")
        info.size, info.mode = len(script), 0o755
        archive.addfile(info, io.BytesIO(script))
        hostile = tarfile.TarInfo(member_name)
        if link_to is None:
            hostile.size = 3
            archive.addfile(hostile, io.BytesIO(b"pwn"))
        else:
            hostile.type = tarfile.SYMTYPE
            hostile.linkname = link_to
            archive.addfile(hostile)
    return buffer.getvalue()
