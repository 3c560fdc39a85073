"""A rolling upgrade of the control plane while agents poll and claim: no request fails.

The previous release's control plane serves a database at its own head. A loop of agents polls
and claims against it all through the upgrade, the way the operators' procedure runs it:
this checkout's migrations are applied (`nachtwacht control migrate`) while the previous release
keeps serving, then this checkout's control plane joins as a second replica over the same
database and the loop goes on against both. Every answer of every phase is one an agent expects
(a config or a 304; a grant, a full round, or its slot already taken) — never a 5xx, never a
connection refused, never an answer this checkout's agent could not read.

The migrations newer than the previous release are expand-only (`test_expand_only`), which is
what lets the previous release go on serving on the newer schema.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
import pytest
from pydantic import ValidationError

from ground.contract import (
    CLAIMS_PATH,
    CONFIG_PATH,
    CONTRACT_VERSION,
    CONTRACT_VERSION_HEADER,
    AgentConfig,
    ClaimGrant,
    ErrorAnswer,
    RefusalCode,
)
from nachtwacht.demo_world.children import Subprocesses
from nachtwacht.demo_world.control_planes import RunningControlPlane, start_control_plane
from signed_release.keys import generate_key_files
from tests.rolling.previous_build import published_by_previous
from tests.worlds.processes import run_child
from tests.worlds.waiting import wait_until

pytestmark = pytest.mark.slow

SLOT = "2026-11-30T03:00"
ORGS = 3
AGENTS_PER_ORG = 4
ORG_CAP = 2
GLOBAL_CAP = 4
# Requests each replica must have answered in a phase before the test moves on: enough that the
# loop ran through the phase, few enough for a shared machine.
PER_PHASE = 30
LOOP_THREADS = 3

# What an agent may be answered, by request: anything else is a failed request.
POLL_ANSWERS = {200, 304}
CLAIM_REFUSALS = {
    RefusalCode.SLOT_CONSUMED.value,
    RefusalCode.ORG_CAP.value,
    RefusalCode.GLOBAL_CAP.value,
}


@dataclass
class Answer:
    phase: str
    replica: str
    kind: str  # "poll" or "claim"
    status: int | None
    problem: str | None  # why it counts as failed; None when it is an answer an agent expects


@dataclass
class Loop:
    """Agents polling and claiming against whichever replicas are serving, until stopped."""

    agents: list[str]
    replicas: dict[str, str] = field(default_factory=dict)  # name -> base URL
    phase: str = "previous release alone"
    answers: list[Answer] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def serve_from(self, name: str, base_url: str) -> None:
        with self.lock:
            self.replicas[name] = base_url

    def enter(self, phase: str) -> None:
        with self.lock:
            self.phase = phase

    def count(self, phase: str, replica: str) -> int:
        with self.lock:
            return sum(1 for a in self.answers if a.phase == phase and a.replica == replica)

    def run(self, offset: int) -> None:
        etags: dict[str, str] = {}
        with httpx.Client(timeout=60) as client:
            for turn in itertools.count(offset):
                if self.stop.is_set():
                    return
                with self.lock:
                    phase = self.phase
                    names = sorted(self.replicas)
                name = names[turn % len(names)]
                base_url = self.replicas[name]
                agent_key = self.agents[turn % len(self.agents)]
                headers = {"Authorization": f"Bearer {agent_key}"}
                # Half of the fleet is this checkout's agent, half from before the header.
                if turn % 2:
                    headers[CONTRACT_VERSION_HEADER] = str(CONTRACT_VERSION)
                self._record(phase, name, "poll", _poll, client, base_url, headers, etags)
                self._record(phase, name, "claim", _claim, client, base_url, headers)

    def _record(
        self, phase: str, replica: str, kind: str, ask: Callable[..., Answer], *args: object
    ) -> None:
        try:
            answer = ask(*args)
        except httpx.HTTPError as exc:
            answer = Answer(phase, replica, kind, None, f"{type(exc).__name__}: {exc}")
        answer.phase, answer.replica = phase, replica
        with self.lock:
            self.answers.append(answer)


def _poll(
    client: httpx.Client, base_url: str, headers: dict[str, str], etags: dict[str, str]
) -> Answer:
    agent = headers["Authorization"]
    sent = dict(headers)
    if agent in etags:
        sent["If-None-Match"] = etags[agent]
    response = client.get(f"{base_url}{CONFIG_PATH}", headers=sent)
    problem = None
    if response.status_code not in POLL_ANSWERS:
        problem = f"poll answered {response.status_code}: {response.text[:300]}"
    elif response.status_code == 200:
        try:
            AgentConfig.model_validate_json(response.content)
        except ValidationError as exc:
            problem = f"a config this checkout's agent cannot read: {exc}"
        etags[agent] = response.headers.get("ETag", "")
    return Answer("", "", "poll", response.status_code, problem)


def _claim(client: httpx.Client, base_url: str, headers: dict[str, str]) -> Answer:
    response = client.post(
        f"{base_url}{CLAIMS_PATH}",
        headers=headers,
        json={"slot_key": SLOT, "from_version": "1.4.1"},
    )
    problem = None
    try:
        # 201 a grant; 200 the same grant again, to the agent that holds it.
        if response.status_code in {200, 201}:
            ClaimGrant.model_validate_json(response.content)
        elif response.status_code in {409, 429}:
            code = ErrorAnswer.model_validate_json(response.content).detail.code
            if code not in CLAIM_REFUSALS:
                problem = f"claim refused {response.status_code} {code}"
        else:
            problem = f"claim answered {response.status_code}: {response.text[:300]}"
    except ValidationError as exc:
        problem = f"a claim answer this checkout's agent cannot read: {exc}"
    return Answer("", "", "claim", response.status_code, problem)


@pytest.fixture
def loop_threads() -> Iterator[list[threading.Thread]]:
    threads: list[threading.Thread] = []
    yield threads
    for thread in threads:
        thread.join(timeout=120)


def test_no_poll_or_claim_fails_while_the_schema_is_migrated_and_a_new_replica_joins(
    tmp_path: Path,
    empty_database_url: str,
    previous_release: Subprocesses,
    control_plane_server: Callable[..., RunningControlPlane],
    loop_threads: list[threading.Thread],
) -> None:
    url = empty_database_url
    # 1. The previous release migrates the database to its own head and serves it.
    migrated = previous_release.run("control", "migrate", "--database-url", url)
    assert migrated.returncode == 0, migrated.stderr
    previous_head = _revision(url)

    _, public_key, _ = generate_key_files(tmp_path / "keys")
    env = {"NACHTWACHT_RELEASE_PUBLIC_KEYS": str(public_key)}
    # Both replicas show the same product time, almost frozen at 03:01 CET: one round.
    fake_clock = f"2026-11-30T02:01:00Z,anchor={time.time()!r},speed=0.001"
    previous = start_control_plane(
        stderr_path=tmp_path / "previous.stderr",
        database_url=url,
        fake_clock=fake_clock,
        env=env,
        args=["--no-migrate", "--org-cap", str(ORG_CAP), "--global-cap", str(GLOBAL_CAP)],
        launcher=previous_release,
    )
    try:
        agents = _fleet(previous)
        published_by_previous(
            previous, tmp_path, clock_setting=fake_clock, previous_release=previous_release
        )

        loop = Loop(agents=agents)
        loop.serve_from("previous", previous.base_url)
        for offset in range(LOOP_THREADS):
            thread = threading.Thread(target=loop.run, args=(offset,), daemon=True)
            loop_threads.append(thread)
            thread.start()
        try:
            _until(loop, "previous release alone", ["previous"])

            # 2. This checkout's migrations, run as the product runs them, while it serves.
            loop.enter("migrating")
            applied = run_child("control", "migrate", "--database-url", url)
            assert applied.returncode == 0, applied.stderr
            _until(loop, "migrating", ["previous"])

            # 3. This checkout's control plane joins as a second replica.
            loop.enter("joining")
            current = control_plane_server(
                database_url=url, fake_clock=fake_clock, env=env, args=["--no-migrate"]
            )
            loop.serve_from("current", current.base_url)
            loop.enter("both")
            _until(loop, "both", ["previous", "current"])
        finally:
            loop.stop.set()
            for thread in loop_threads:
                thread.join(timeout=120)
    finally:
        previous.stop()

    failed = [a for a in loop.answers if a.problem is not None]
    assert failed == [], "\n".join(
        f"{a.phase} / {a.replica} / {a.kind}: {a.problem}" for a in failed[:20]
    )
    for replica in (previous, current):
        assert "Traceback" not in replica.stderr(), replica.stderr()
    by_phase = Counter((a.phase, a.replica, a.kind) for a in loop.answers)
    print(json.dumps({" / ".join(key): n for key, n in sorted(by_phase.items())}, indent=1))
    # The caps held across the two releases: exactly the global cap granted, within each org's.
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM tokens").fetchone() == (GLOBAL_CAP,)
        per_org = conn.execute("SELECT max(granted) FROM claim_rounds_org").fetchone()
        assert per_org is not None and per_org[0] <= ORG_CAP
    assert previous_head is not None
    assert _revision(url) == _current_head()


def _until(loop: Loop, phase: str, replicas: list[str]) -> None:
    for replica in replicas:
        wait_until(
            functools.partial(_answered, loop, phase, replica),
            what=f"{PER_PHASE} answers from {replica} in phase {phase!r}",
            timeout=300,
        )


def _answered(loop: Loop, phase: str, replica: str) -> bool:
    return loop.count(phase, replica) >= PER_PHASE


def _fleet(plane: RunningControlPlane) -> list[str]:
    agents = []
    for o in range(ORGS):
        org = plane.create_org(f"Org {o}")
        for n in range(AGENTS_PER_ORG):
            agents.append(plane.enroll_agent(org["org_id"], f"web-{n}")["agent_key"])
    return agents


def _revision(url: str) -> str | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    return None if row is None else str(row[0])


def _current_head() -> str:
    from control_plane.schema_version import head_revision

    return head_revision()
