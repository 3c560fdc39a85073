"""A night through a PostgreSQL failover: two `control serve` replicas on a multi-host URL, a
fleet of simulated agents claiming one slot over real HTTP, the primary SIGKILLed mid-window and
its standby promoted.

    night = FailoverNight(pair, start_replica, orgs=3, agents_per_org=12)
    night.seed()                      # replicas started (the first migrates), fleet enrolled
    night.run(kill_after=6.0, promote_after=2.0)
    night.recovery                    # per replica: seconds from the kill to its first database
                                      # answer, and to its first grant

The agents are threads: each asks its replica (agent i → replica i % 2) for a token once per
product minute, and twice a real second while the replica answers 503, until it is granted (201)
or the window closed (409 `window_closed`). Every answer is kept. A probe per replica reads the
agents list (`GET /v1/agents`, a panel key: a database read every time) every 50 ms, so the time
to recover is measured apart from the rounds' rhythm.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.database import open_pool
from control_plane.registry import build_services
from ground.clock import FakeClock
from nachtwacht.demo_world.control_planes import RunningControlPlane
from signed_release.keys import key_id
from tests.control_plane.conftest import sign_release
from tests.worlds.replicated_postgres import ReplicatedPair

__all__ = ["SLOT", "Answer", "FailoverNight"]

SLOT = "2026-11-30T03:00"  # Amsterdam, the agents' default time: 02:00Z, closes 02:15Z
WINDOW_OPENS = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
WINDOW_CLOSES = datetime(2026, 11, 30, 2, 15, tzinfo=UTC)
SPEED = 20.0  # a product minute is three real seconds: the window lasts 45 s
ORG_CAP = 1
GLOBAL_CAP = 2


@dataclass(frozen=True)
class Answer:
    agent: int
    replica: int
    at: float  # time.monotonic()
    status: int
    body: dict[str, Any]


@dataclass
class Recovery:
    first_answer: float | None = None  # seconds from the kill to the probe's first 200
    first_grant: float | None = None  # seconds from the kill to the replica's first 201


@dataclass
class FailoverNight:
    pair: ReplicatedPair
    start_replica: Callable[[str, list[str]], RunningControlPlane]
    home: Path
    orgs: int = 3
    agents_per_org: int = 12
    org_cap: int = ORG_CAP
    global_cap: int = GLOBAL_CAP
    replicas: list[RunningControlPlane] = field(default_factory=list)
    agent_keys: list[str] = field(default_factory=list)
    panel_key: str = ""
    answers: list[Answer] = field(default_factory=list)
    probes: list[tuple[int, float, int]] = field(default_factory=list)  # replica, at, status
    killed_at: float = 0.0
    promoted_at: float = 0.0
    clock: FakeClock | None = None

    def seed(self) -> None:
        begins = self.home / "clock-begins"
        setting = f"{WINDOW_OPENS.isoformat().replace('+00:00', 'Z')},begins={begins},speed={SPEED}"
        flags = ["--org-cap", str(self.org_cap), "--global-cap", str(self.global_cap)]
        # One at a time: the first migrates the database, the second finds it at the head.
        for _ in range(2):
            self.replicas.append(self.start_replica(setting, flags))
        key = Ed25519PrivateKey.generate()
        pool = open_pool(self.pair.url, min_size=1, max_size=1)
        try:
            services = build_services(pool, {key_id(key.public_key()): key.public_key()})
            now = WINDOW_OPENS
            release = sign_release(key)
            services.releases.publish(
                release.manifest, release.signature, release.artifact, now=now
            )
            for o in range(self.orgs):
                org = services.accounts.create_org(f"Org {o}", now=now)
                if o == 0:
                    self.panel_key = services.accounts.create_panel_key(org.org_id)
                for n in range(self.agents_per_org):
                    issued = services.accounts.enroll_agent(org.org_id, f"web-{o}-{n}", now=now)
                    self.agent_keys.append(issued.agent_key)
        finally:
            pool.close()
        anchor = time.time()
        self.clock = FakeClock(start=WINDOW_OPENS, anchor=anchor, speed=SPEED)
        begins.write_text(repr(anchor))

    def run(self, *, kill_after: float, promote_after: float) -> None:
        """The window: agents and probes from its start; `kill_after` real seconds in, the
        primary is killed, and `promote_after` seconds later the standby promoted."""
        stop = threading.Event()
        lock = threading.Lock()
        threads = [
            threading.Thread(target=self._agent, args=(index, key, lock), daemon=True)
            for index, key in enumerate(self.agent_keys)
        ]
        threads += [
            threading.Thread(target=self._probe, args=(replica, stop, lock), daemon=True)
            for replica in range(len(self.replicas))
        ]
        for thread in threads:
            thread.start()
        time.sleep(kill_after)
        self.killed_at = time.monotonic()
        self.pair.kill(self.pair.primary)
        time.sleep(promote_after)
        self.pair.promote(self.pair.standby)
        self.promoted_at = time.monotonic()  # `pg_ctl promote -w` returned: the standby writes
        for thread in threads[: len(self.agent_keys)]:
            thread.join(timeout=120)
        stop.set()
        for thread in threads[len(self.agent_keys) :]:
            thread.join(timeout=30)

    def _agent(self, index: int, agent_key: str, lock: threading.Lock) -> None:
        replica = index % len(self.replicas)
        assert self.clock is not None
        with httpx.Client(base_url=self.replicas[replica].base_url, timeout=30) as client:
            while True:
                try:
                    response = client.post(
                        "/v1/agent/claims",
                        headers={"Authorization": f"Bearer {agent_key}"},
                        json={"slot_key": SLOT, "from_version": "1.4.1"},
                    )
                    body = response.json()
                    status = response.status_code
                except (httpx.HTTPError, ValueError) as exc:
                    status, body = 0, {"error": str(exc)}
                with lock:
                    self.answers.append(Answer(index, replica, time.monotonic(), status, body))
                if status in {200, 201} or (
                    status == 409 and body.get("detail", {}).get("code") == "window_closed"
                ):
                    return
                if self.clock.now() > WINDOW_CLOSES:
                    return
                if status == 429:
                    # The next round: the start of the next product minute.
                    now = self.clock.now()
                    time.sleep(self.clock.real_seconds(60 - now.second - now.microsecond / 1e6))
                else:
                    time.sleep(0.5)

    def _probe(self, replica: int, stop: threading.Event, lock: threading.Lock) -> None:
        with httpx.Client(base_url=self.replicas[replica].base_url, timeout=30) as client:
            while not stop.is_set():
                try:
                    status = client.get(
                        "/v1/agents", headers={"Authorization": f"Bearer {self.panel_key}"}
                    ).status_code
                except httpx.HTTPError:
                    status = 0
                with lock:
                    self.probes.append((replica, time.monotonic(), status))
                time.sleep(0.05)

    def recovery(self) -> list[Recovery]:
        """Per replica: seconds from the kill to its first database answer after the outage
        began (its first 503), and to its first grant after the kill."""
        found = []
        for replica in range(len(self.replicas)):
            mine = [(at, status) for r, at, status in self.probes if r == replica]
            outage = [at for at, status in mine if at >= self.killed_at and status != 200]
            began = outage[0] if outage else self.killed_at
            answered = [at for at, status in mine if at > began and status == 200]
            grants = [
                a.at
                for a in self.answers
                if a.replica == replica and a.status == 201 and a.at > self.killed_at
            ]
            found.append(
                Recovery(
                    first_answer=answered[0] - self.killed_at if answered else None,
                    first_grant=grants[0] - self.killed_at if grants else None,
                )
            )
        return found
