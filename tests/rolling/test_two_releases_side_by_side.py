"""The previous release's agent during the roll, answered by a replica of either release over one
database this checkout migrated while the previous release served it: the config's ETag is the
same whichever release answered, so a poll that reaches the other replica gets its 304
(docs/upgrading.md); each replica answers what the other wrote; and a night whose steps land on
both (claim, download and its resumption, confirm, report) ends as one run. Real processes over
loopback, the agent's requests as the previous release shapes them."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest

from control_plane import migrate
from ground.contract import CLAIMS_PATH, CONFIG_PATH
from nachtwacht.demo_world.children import Subprocesses
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from signed_release.keys import generate_key_files
from tests.rolling.previous_build import published_by_previous

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Roll:
    previous: RunningControlPlane
    current: RunningControlPlane
    org_id: str
    agent_key: str
    artifact: bytes


@pytest.fixture
def roll(tmp_path: Path, empty_database_url: str, previous_release: Subprocesses) -> Iterator[Roll]:
    """A replica of the previous release and one of this, one database, an agent enrolled and a
    release published by the previous release before this checkout migrated the database."""
    url = empty_database_url
    migrated = previous_release.run("control", "migrate", "--database-url", url)
    assert migrated.returncode == 0, migrated.stderr
    _, public_key, _ = generate_key_files(tmp_path / "keys")
    # Product time almost frozen at 03:01 CET, inside the 03:00 slot's window.
    fake_clock = f"2026-11-30T02:01:00Z,anchor={time.time()!r},speed=0.001"
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
        build = published_by_previous(
            previous, tmp_path, clock_setting=fake_clock, previous_release=previous_release
        )
        migrate.upgrade(url)
        current = start_control_plane(
            stderr_path=tmp_path / "current.stderr",
            database_url=url,
            fake_clock=fake_clock,
            env=env,
            args=["--no-migrate"],
        )
        yield Roll(previous, current, org["org_id"], agent_key, build.artifact.read_bytes())
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


def test_a_poll_answered_by_one_release_is_a_304_at_the_other(roll: Roll) -> None:
    previous, current, key = roll.previous, roll.current, roll.agent_key
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


def test_what_one_release_writes_the_other_answers(roll: Roll) -> None:
    previous, current, key = roll.previous, roll.current, roll.agent_key
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


def _agent(plane: RunningControlPlane, key: str) -> httpx.Client:
    # The previous release's agent: no contract header, no `Date`.
    headers = {"Authorization": f"Bearer {key}", "X-Nachtwacht-Host-Id": "host-0002"}
    return httpx.Client(base_url=plane.base_url, headers=headers, timeout=60)


@pytest.mark.parametrize("first", ["previous", "current"])
def test_a_night_that_moves_between_the_releases_ends_as_one_run(roll: Roll, first: str) -> None:
    """Claimed at one replica; downloaded (whole, and resumed from a byte range), confirmed and
    reported at the other, then at the first again: each step is taken wherever it lands."""
    one, other = (
        (roll.previous, roll.current) if first == "previous" else (roll.current, roll.previous)
    )
    key = roll.current.enroll_agent(roll.org_id, f"web-{first}")["agent_key"]
    claim = {"slot_key": "2026-11-30T03:00", "from_version": "1.4.1"}
    with _agent(one, key) as at_one, _agent(other, key) as at_other:
        granted = at_one.post(CLAIMS_PATH, json=claim)
        assert granted.status_code == 201, granted.text
        grant = granted.json()
        # The same grant (this release adds `product`, which the previous one's agent ignores).
        again = at_other.post(CLAIMS_PATH, json=claim).json()
        assert _known(again) == _known(grant), (again, grant)
        url = grant["release"]["artifact_url"]
        whole = at_other.get(url)
        assert whole.status_code == 200, whole.text[:500]
        assert whole.content == roll.artifact
        tail = at_one.get(url, headers={"Range": "bytes=100-", "If-Range": whole.headers["ETag"]})
        assert tail.status_code == 206, tail.text[:500]
        assert whole.content[:100] + tail.content == roll.artifact
        assert hashlib.sha256(whole.content).hexdigest() in _manifest(grant)
        run = f"/v1/agent/runs/{grant['run_id']}"
        permit = at_other.post(f"{run}/confirm")
        assert permit.status_code == 200, permit.text
        assert at_one.post(f"{run}/confirm").status_code == 200
        report = {"status": "succeeded", "version": "1.5.0", "switched_at": "2026-11-30T02:01:00Z"}
        taken = at_other.patch(run, json=report)
        assert taken.status_code == 200, taken.text
        reported_again = at_one.patch(run, json=report)
        assert reported_again.status_code == 200, reported_again.text
    with psycopg.connect(roll.current.database_url) as conn:
        ended = conn.execute(
            "SELECT status, version FROM runs WHERE agent_id = (SELECT agent_id FROM runs"
            " WHERE id = %s)",
            [grant["run_id"]],
        ).fetchall()
    assert ended == [("succeeded", "1.5.0")]


def _known(grant: dict[str, object]) -> dict[str, object]:
    """A grant as the previous release's agent reads it."""
    return {name: value for name, value in grant.items() if name != "product"}


def _manifest(grant: dict[str, object]) -> str:
    import base64

    release = grant["release"]
    assert isinstance(release, dict)
    return base64.b64decode(release["manifest_b64"]).decode("utf-8")
