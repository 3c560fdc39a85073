"""The previous release's agent polling replicas of both releases during the roll: an answer one
replica gave is the answer the other gives. The config's ETag is the same whichever release
answered, so a poll that reaches the other replica gets its 304 (docs/upgrading.md), and each
replica reads what the other wrote for this agent. Real processes over loopback, one database
this checkout migrated while the previous release served it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from control_plane import migrate
from ground.contract import CONFIG_PATH
from nachtwacht.demo_world.children import Subprocesses
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from nachtwacht.demo_world.release_tooling import sign_build
from signed_release.keys import generate_key_files

pytestmark = pytest.mark.slow


@pytest.fixture
def two_replicas(
    tmp_path: Path, empty_database_url: str, previous_release: Subprocesses
) -> Iterator[tuple[RunningControlPlane, RunningControlPlane, str]]:
    """(the previous release's replica, this release's, an agent's key), one database."""
    url = empty_database_url
    migrated = previous_release.run("control", "migrate", "--database-url", url)
    assert migrated.returncode == 0, migrated.stderr
    _, public_key, _ = generate_key_files(tmp_path / "keys")
    # Product time almost frozen at 10:01 CET: no slot is due.
    fake_clock = f"2026-11-30T09:01:00Z,anchor={time.time()!r},speed=0.001"
    env = {"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(public_key)}
    previous = start_control_plane(
        stderr_path=tmp_path / "previous.stderr",
        database_url=url,
        fake_clock=fake_clock,
        env=env,
        args=["--no-migrate"],
        launcher=previous_release,
    )
    current = None
    try:
        org = previous.create_org("Acme")
        agent_key = previous.enroll_agent(org["org_id"], "web-01")["agent_key"]
        build = sign_build(
            version="1.5.0",
            manifest_version=42,
            keys_dir=tmp_path / "keys",
            workdir=tmp_path,
            clock_setting=fake_clock,
            launcher=previous_release,
        )
        previous.publish_release(build)
        migrate.upgrade(url)
        current = start_control_plane(
            stderr_path=tmp_path / "current.stderr",
            database_url=url,
            fake_clock=fake_clock,
            env=env,
            args=["--no-migrate"],
        )
        yield previous, current, agent_key
        assert "Traceback" not in previous.stderr()
        assert "Traceback" not in current.stderr()
    finally:
        if current is not None:
            current.stop()
        previous.stop()


def _poll(plane: RunningControlPlane, key: str, etag: str | None = None) -> httpx.Response:
    # The previous release's agent: no contract header, no `Date`.
    headers = {"Authorization": f"Bearer {key}", "X-Nachtwacht-Host-Id": "host-0001"}
    if etag is not None:
        headers["If-None-Match"] = etag
    with httpx.Client(base_url=plane.base_url, timeout=60) as client:
        return client.get(CONFIG_PATH, headers=headers)


def test_a_poll_answered_by_one_release_is_a_304_at_the_other(
    two_replicas: tuple[RunningControlPlane, RunningControlPlane, str],
) -> None:
    previous, current, key = two_replicas
    by_previous = _poll(previous, key)
    by_current = _poll(current, key)
    assert by_previous.status_code == by_current.status_code == 200, by_current.text
    assert by_previous.headers["ETag"] == by_current.headers["ETag"]
    assert by_previous.json()["release"]["version"] == by_current.json()["release"]["version"]
    assert _poll(current, key, by_previous.headers["ETag"]).status_code == 304
    assert _poll(previous, key, by_current.headers["ETag"]).status_code == 304


def _config_after(
    plane: RunningControlPlane, key: str, etag: str, changed: str
) -> dict[str, object]:
    """The config `plane` answers once it has followed a change the other replica wrote: never
    the 304 of the answer before it (each replica's memory follows the database's change feed,
    within a few seconds)."""
    deadline = time.monotonic() + 30
    while True:
        answer = _poll(plane, key, etag)
        if answer.status_code == 200:
            body: dict[str, object] = answer.json()
            return body
        assert answer.status_code == 304, answer.text
        assert time.monotonic() < deadline, f"{plane.base_url} still answers 304 after {changed}"
        time.sleep(0.2)


def test_what_one_release_writes_the_other_answers(
    two_replicas: tuple[RunningControlPlane, RunningControlPlane, str],
) -> None:
    previous, current, key = two_replicas
    etag = _poll(previous, key).headers["ETag"]
    assert _poll(current, key, etag).status_code == 304

    # The operators' brake, engaged by this release's command: the previous replica says it.
    engaged = current.admin("brake", "engage", "--reason", "incident 7")
    assert engaged, engaged
    for plane in (previous, current):
        seen = _config_after(plane, key, etag, "the brake")
        assert seen["brake"] == {"engaged": True, "reason": "incident 7"}, seen
    etag = _poll(current, key).headers["ETag"]
    assert _poll(previous, key, etag).status_code == 304

    # The host's hold, set through the previous replica: this release's says it.
    headers = {"Authorization": f"Bearer {key}", "X-Nachtwacht-Host-Id": "host-0001"}
    with httpx.Client(base_url=previous.base_url, timeout=60) as client:
        held = client.put(
            "/v1/agent/hold",
            headers=headers,
            json={"until": "2026-12-02T08:00:00Z", "reason": "patching"},
        )
    assert held.status_code == 200, held.text
    for plane in (current, previous):
        seen = _config_after(plane, key, etag, "the hold")
        assert isinstance(seen["hold"], dict) and seen["hold"]["set_by"] == "agent", seen
    assert _poll(previous, key, _poll(current, key).headers["ETag"]).status_code == 304
    assert _poll(current, key, _poll(previous, key).headers["ETag"]).status_code == 304
