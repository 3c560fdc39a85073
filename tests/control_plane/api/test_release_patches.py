"""A release's patches: accepted on publish only as the signed manifest names them, served under
the run's token with Range like the artifact, and the bytes served counted per release and kind."""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.errors import InvalidInput
from control_plane.types import Pool
from signed_release.manifest import parse_manifest
from signed_release.patch_offer import PatchOffer
from signed_release.signature import sign_manifest
from tests.control_plane.conftest import Agent, Api, Org, sign_release
from tests.worlds.clocks import ManualClock

SLOT = "2026-11-30T03:00"
BASE = "cd" * 32
PATCH = b"a patch from 1.4.1" * 50


def _with_patch(key: Ed25519PrivateKey) -> tuple[bytes, bytes, bytes]:
    plain = sign_release(key)
    manifest = replace(
        parse_manifest(plain.manifest),
        tar_length=20_000,
        tar_sha256="12" * 32,
        patches=(
            PatchOffer(
                base_version="1.4.1",
                base_tar_length=19_000,
                base_tar_sha256=BASE,
                length=len(PATCH),
                sha256=hashlib.sha256(PATCH).hexdigest(),
            ),
        ),
    )
    data = manifest.to_bytes()
    return data, sign_manifest(data, key), plain.artifact


@pytest.fixture
def agent(make_org: Callable[..., Org], make_agent: Callable[..., Agent]) -> Agent:
    return make_agent(make_org())


@pytest.fixture
def run_id(api: Api, clock: ManualClock, release_key: Ed25519PrivateKey, agent: Agent) -> str:
    manifest, signature, artifact = _with_patch(release_key)
    api.services.releases.publish(
        manifest, signature, artifact, now=clock.now(), patches={BASE: PATCH}
    )
    clock.set(datetime(2026, 11, 30, 2, 1, tzinfo=UTC))
    with api.client(agent.agent_key) as client:
        response = client.post("/v1/agent/claims", json={"slot_key": SLOT, "from_version": "1.4.1"})
    assert response.status_code == 201
    body: dict[str, Any] = response.json()
    return str(body["run_id"])


def _get(api: Api, agent: Agent, path: str, **headers: str) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.get(path, headers=headers)


def _served(pool: Pool) -> dict[str, int]:
    with pool.connection() as conn:
        rows = conn.execute("SELECT kind, bytes FROM release_bytes_served").fetchall()
    return {row["kind"]: row["bytes"] for row in rows}


def test_the_patch_is_served_whole_and_by_range_and_counted(
    api: Api, agent: Agent, run_id: str, pool: Pool, operator_key: str
) -> None:
    path = f"/v1/agent/runs/{run_id}/patches/{BASE}"
    whole = _get(api, agent, path)
    assert whole.status_code == 200
    assert whole.content == PATCH
    etag = f'"{hashlib.sha256(PATCH).hexdigest()}"'
    assert whole.headers["ETag"] == etag
    resumed = _get(api, agent, path, Range="bytes=100-", **{"If-Range": etag})
    assert resumed.status_code == 206
    assert resumed.content == PATCH[100:]
    full = _get(api, agent, f"/v1/agent/runs/{run_id}/artifact")
    assert full.status_code == 200
    assert _served(pool) == {"patch": 2 * len(PATCH) - 100, "full": len(full.content)}
    with api.client(operator_key) as operator:
        metrics = operator.get("/metrics")
    labels = (
        'channel="stable",kind="patch",platform="linux-x86_64",'
        r'release="[0-9a-f-]{36}",version="1\.5\.0"'
    )
    served = re.search(
        r"nachtwacht_release_bytes_served_total\{" + labels + r"\} (\d+)", metrics.text
    )
    assert served is not None, metrics.text
    assert int(served.group(1)) == 2 * len(PATCH) - 100


def test_a_base_without_a_patch_is_404(api: Api, agent: Agent, run_id: str) -> None:
    response = _get(api, agent, f"/v1/agent/runs/{run_id}/patches/{'ab' * 32}")
    assert response.status_code == 404


def test_a_patch_is_refused_without_the_runs_token(
    api: Api,
    agent: Agent,
    run_id: str,
    make_agent: Callable[..., Agent],
    make_org: Callable[..., Org],
) -> None:
    stranger = make_agent(make_org())
    response = _get(api, stranger, f"/v1/agent/runs/{run_id}/patches/{BASE}")
    assert response.status_code == 404


@pytest.mark.parametrize(
    ("patches", "expected"),
    [
        pytest.param({BASE: PATCH[:-1]}, "is not the signed patch", id="not_the_signed_bytes"),
        pytest.param(
            {"ef" * 32: PATCH}, "is not a base the signed manifest offers", id="unoffered"
        ),
    ],
)
def test_publish_refuses_a_patch_the_manifest_does_not_sign(
    api: Api,
    clock: ManualClock,
    release_key: Ed25519PrivateKey,
    patches: dict[str, bytes],
    expected: str,
) -> None:
    manifest, signature, artifact = _with_patch(release_key)
    with pytest.raises(InvalidInput, match=expected):
        api.services.releases.publish(
            manifest, signature, artifact, now=clock.now(), patches=patches
        )


def test_the_publish_route_takes_patches_by_base(
    api: Api, release_key: Ed25519PrivateKey, operator_key: str, pool: Pool
) -> None:
    manifest, signature, artifact = _with_patch(release_key)
    body = {
        "manifest_b64": base64.b64encode(manifest).decode(),
        "signature_b64": base64.b64encode(signature).decode(),
        "artifact_b64": base64.b64encode(artifact).decode(),
        "patches_b64": {BASE: base64.b64encode(PATCH).decode()},
    }
    with api.client(operator_key) as operator:
        answer = operator.post("/v1/admin/releases", json=body)
    assert answer.status_code == 201, answer.text
    with pool.connection() as conn:
        row = conn.execute("SELECT base_tar_sha256, length FROM release_patches").fetchone()
    assert row is not None
    assert (row["base_tar_sha256"], row["length"]) == (BASE, len(PATCH))
