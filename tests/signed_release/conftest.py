from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from signed_release.manifest import Manifest

ISSUED = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


def manifest_fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "manifest_version": 42,
        "issued_at": "2026-11-30T02:00:00Z",
        "expires": "2026-12-30T02:00:00Z",
        "channel": "stable",
        "platform": "linux-x86_64",
        "agent_version": "1.5.0",
        "length": 1234,
        "sha256": "ab" * 32,
        "unpacked_size": 4096,
        "allow_downgrade": False,
        "artifact_format": "tar.gz",
    }
    fields.update(overrides)
    return fields


def manifest_json(**overrides: Any) -> bytes:
    return json.dumps(manifest_fields(**overrides)).encode()


@pytest.fixture
def manifest() -> Manifest:
    return Manifest(
        manifest_version=42,
        issued_at=ISSUED,
        expires=ISSUED + timedelta(days=30),
        channel="stable",
        platform="linux-x86_64",
        agent_version="1.5.0",
        length=1234,
        sha256="ab" * 32,
        unpacked_size=4096,
    )
