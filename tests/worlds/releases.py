"""The release factory: a real Ed25519 key, real demo-agent builds, real signed manifests, made
in this process with the release-format package (`signed_release`) itself.

    factory = ReleaseFactory(workdir=…)                 # a new key; or key=load_private_key(…)
    release = factory.release("1.5.0", 42)             # build + sign: a Release (bytes)
    release = factory.sign(artifact_bytes, version="1.5.0", manifest_version=42, …)
    factory.trusted                                    # {key id: public key}, as agents pin it
    factory.write_public_key(path)                     # release.pub for a config file

`release_tooling` makes the same things through the CLIs, as a release engineer does.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from nachtwacht.demo_world.demo_agent import Fault, build_demo_agent
from nachtwacht.demo_world.errors import WorldError
from signed_release.artifact import describe_artifact
from signed_release.keys import key_id
from signed_release.manifest import Manifest, Product
from signed_release.signature import sign_manifest

__all__ = ["Release", "ReleaseFactory"]


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
    """Builds and signs releases with one pinned key. `workdir` holds built and measured
    archives; a factory that only signs given bytes with a given `unpacked_size` needs none."""

    workdir: Path | None = None
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    issued_at: datetime = field(
        default_factory=lambda: datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    )

    def _workdir(self) -> Path:
        if self.workdir is None:
            raise WorldError("this release factory has no workdir to build or measure archives in")
        return self.workdir

    @property
    def trusted(self) -> dict[str, Ed25519PublicKey]:
        public = self.key.public_key()
        return {key_id(public): public}

    def write_public_key(self, path: Path) -> Path:
        """The public key as `release.pub` (SubjectPublicKeyInfo PEM), for a trusted-key path."""
        path.write_bytes(
            self.key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        )
        return path

    def artifact(self, version: str, fault: Fault = "none", *, padding_bytes: int = 0) -> bytes:
        """A demo-agent build (cached in `workdir`); `padding_bytes` make it realistically big."""
        path = self._workdir() / f"build-{version}-{fault}-{padding_bytes}.tar.gz"
        if not path.exists():
            build_demo_agent(path, version=version, fault=fault, padding_bytes=padding_bytes)
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
        product: Product = "agent",
    ) -> Release:
        """A manifest for `artifact`, signed; `unpacked_size` is measured unless given (a build that
        is not a tar.gz, for the attack tests and the benchmarks, needs it given)."""
        if unpacked_size is None:
            workdir = self._workdir()
            workdir.mkdir(parents=True, exist_ok=True)
            path = workdir / f"sign-{hashlib.sha256(artifact).hexdigest()}.tar.gz"
            path.write_bytes(artifact)
            unpacked_size = describe_artifact(path, product=product).unpacked_size
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
            unpacked_size=unpacked_size,
            allow_downgrade=allow_downgrade,
            product=product,
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
            # The options are `sign`'s keywords, passed through unchanged; spelling them out
            # twice would let the two signatures drift.
            **options,  # type: ignore[arg-type]
        )
