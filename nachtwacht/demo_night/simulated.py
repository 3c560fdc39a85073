"""Agents simulated in one process, speaking the agents' HTTP API exactly as the daemon does
(docs/architecture.md "Agent ↔ control plane"), for a fleet too large for one process per agent:
the demo above `--process-limit`, and `bench/fleet.py`.

Each simulated agent, once a minute of the shared fake clock at its own second (the daemon's
`second_in_minute`): syncs its config (`If-None-Match`), plans with `shared_planner.due_slot` on
the server's time (the `X-Nachtwacht-Server-Time` header), and takes the steps of DESIGN.md rule 8
— up to date → `POST /v1/agent/runs`; else `POST /v1/agent/claims`; a grant downloads the artifact,
checks it against the signed manifest (signature, length, sha256) and reports `succeeded`.
Nothing is installed: that is what the real daemons of the demo show.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_daemon.service import second_in_minute
from ground.clock import FakeClock
from ground.contract import SERVER_TIME_HEADER, InstantError, parse_instant
from shared_planner import due_slot
from signed_release import ReleaseError, check_signature, parse_manifest, version_key

__all__ = ["FleetStats", "JournalEntry", "SimulatedAgent", "SimulatedFleet"]

REQUEST_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class JournalEntry:
    at: datetime
    event: str
    detail: str = ""


@dataclass
class SimulatedAgent:
    agent_id: str
    name: str
    org_name: str
    agent_key: str
    installed: str
    base_url: str
    etag: str | None = None
    config: dict[str, Any] | None = None
    last_consumed: datetime | None = None
    minutes_since_sync: int = 10**6
    journal: list[JournalEntry] = field(default_factory=list)

    def note(self, at: datetime, event: str, detail: str = "") -> None:
        self.journal.append(JournalEntry(at, event, detail))


@dataclass
class FleetStats:
    """Per endpoint: latencies (real seconds) and answers by status code."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: dict[str, Counter[int]] = field(default_factory=lambda: defaultdict(Counter))
    failures: Counter[str] = field(default_factory=Counter)
    # Platform seconds between the minute an agent meant to act and the moment it did: a
    # simulator that cannot keep up with its fleet shows it here.
    tick_lag: list[float] = field(default_factory=list)

    def record(self, endpoint: str, seconds: float, status: int) -> None:
        self.latencies[endpoint].append(seconds)
        self.statuses[endpoint][status] += 1

    def percentile(self, endpoint: str, fraction: float) -> float:
        values = sorted(self.latencies[endpoint])
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(fraction * len(values)))]


def _server_now(response: httpx.Response, fallback: datetime) -> datetime:
    stamp = response.headers.get(SERVER_TIME_HEADER)
    if not stamp:
        return fallback
    try:
        return parse_instant(stamp, field=SERVER_TIME_HEADER)
    except InstantError:
        return fallback


class SimulatedFleet:
    def __init__(
        self,
        agents: Sequence[SimulatedAgent],
        *,
        clock: FakeClock,
        trusted_keys: Mapping[str, Ed25519PublicKey],
        config_every_minutes: int = 1,
        max_connections: int = 64,
    ) -> None:
        self.agents = list(agents)
        self.clock = clock
        self.trusted_keys = dict(trusted_keys)
        self.config_every_minutes = config_every_minutes
        self.stats = FleetStats()
        self._max_connections = max_connections
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._in_flight: asyncio.Semaphore | None = None

    # -- the loop -------------------------------------------------------------------------------

    async def run(self, until: datetime, stop: threading.Event | None = None) -> None:
        limits = httpx.Limits(
            max_connections=self._max_connections, max_keepalive_connections=self._max_connections
        )
        # Requests wait here, not in httpx's connection pool: the pool rescans its whole queue on
        # every change, which costs quadratic time with thousands of agents waiting in it.
        self._in_flight = asyncio.Semaphore(self._max_connections)
        for url in {agent.base_url for agent in self.agents}:
            self._clients[url] = httpx.AsyncClient(
                base_url=url, timeout=REQUEST_TIMEOUT_SECONDS, limits=limits
            )
        try:
            await asyncio.gather(*(self._live(agent, until, stop) for agent in self.agents))
        finally:
            for client in self._clients.values():
                await client.aclose()

    async def _live(
        self, agent: SimulatedAgent, until: datetime, stop: threading.Event | None
    ) -> None:
        second = second_in_minute(agent.agent_id)
        while True:
            now = self.clock.now()
            minute = now.replace(second=0, microsecond=0)
            tick = minute + timedelta(seconds=second)
            if tick <= now:
                tick += timedelta(minutes=1)
            if tick >= until or (stop is not None and stop.is_set()):
                return
            await asyncio.sleep(self.clock.real_seconds((tick - now).total_seconds()))
            self.stats.tick_lag.append((self.clock.now() - tick).total_seconds())
            try:
                await self._tick(agent)
            except httpx.HTTPError as exc:
                agent.note(self.clock.now(), "control_plane.offline", type(exc).__name__)
                self.stats.failures[type(exc).__name__] += 1

    async def _request(
        self, agent: SimulatedAgent, endpoint: str, method: str, path: str, **kwargs: Any
    ) -> httpx.Response:
        headers = {"Authorization": f"Bearer {agent.agent_key}", **kwargs.pop("headers", {})}
        assert self._in_flight is not None, "requests are made while the fleet runs"
        async with self._in_flight:
            started = time.perf_counter()
            response = await self._clients[agent.base_url].request(
                method, path, headers=headers, **kwargs
            )
            self.stats.record(endpoint, time.perf_counter() - started, response.status_code)
        return response

    # -- one minute of one agent (DESIGN.md rule 8, in its order) -------------------------------

    async def _tick(self, agent: SimulatedAgent) -> None:
        now = self.clock.now()
        if agent.config is None or agent.minutes_since_sync + 1 >= self.config_every_minutes:
            answer = await self._request(
                agent,
                "GET /v1/agent/config",
                "GET",
                "/v1/agent/config",
                headers={"If-None-Match": agent.etag} if agent.etag else {},
            )
            now = _server_now(answer, now)
            if answer.status_code >= 500:
                agent.note(now, "control_plane.offline", f"HTTP {answer.status_code}")
                return
            if answer.status_code == 200:
                first = agent.config is None
                agent.config, agent.etag = answer.json(), answer.headers.get("ETag")
                release = (agent.config or {}).get("release") or {}
                agent.note(
                    now,
                    "config.synced" if first else "config.changed",
                    f"release {release.get('version', 'none')}",
                )
            elif answer.status_code != 304:
                agent.note(now, "config.refused", f"HTTP {answer.status_code}")
                return
            agent.minutes_since_sync = 0
        else:
            agent.minutes_since_sync += 1
        config = agent.config
        assert config is not None
        schedule = config["schedule"]
        if not schedule["enabled"]:
            return
        slot = due_slot(
            schedule["times"],
            now=now,
            tz=config["timezone"],
            last_consumed=agent.last_consumed,
            catch_up=timedelta(minutes=config["catch_up_minutes"]),
        )
        if slot is None:
            return
        release = config.get("release")
        if release is None or version_key(agent.installed) >= version_key(release["version"]):
            await self._up_to_date(agent, slot.key, slot.at, now)
            return
        await self._claim(agent, slot.key, slot.at, now)

    async def _up_to_date(
        self, agent: SimulatedAgent, slot_key: str, slot_at: datetime, now: datetime
    ) -> None:
        answer = await self._request(
            agent,
            "POST /v1/agent/runs",
            "POST",
            "/v1/agent/runs",
            json={"slot_key": slot_key, "status": "up_to_date", "version": agent.installed},
        )
        if answer.status_code in {200, 201, 409, 422}:
            agent.last_consumed = slot_at
            agent.note(now, "slot.up_to_date", f"{slot_key} on {agent.installed}")
        else:
            agent.note(now, "report.waiting", f"HTTP {answer.status_code}")

    async def _claim(
        self, agent: SimulatedAgent, slot_key: str, slot_at: datetime, now: datetime
    ) -> None:
        answer = await self._request(
            agent,
            "POST /v1/agent/claims",
            "POST",
            "/v1/agent/claims",
            json={"slot_key": slot_key, "from_version": agent.installed},
        )
        now = _server_now(answer, now)
        detail = _detail(answer)
        if answer.status_code in {429, 503}:
            event = "claim.braked" if answer.status_code == 503 else "claim.refused"
            agent.note(now, event, f"{slot_key}: {detail.get('code', answer.status_code)}")
            return
        if answer.status_code in {409, 422}:
            agent.last_consumed = slot_at
            agent.note(now, "claim.slot_gone", f"{slot_key}: {detail.get('code')}")
            return
        if answer.status_code not in {200, 201}:
            agent.note(now, "claim.failed", f"{slot_key}: HTTP {answer.status_code}")
            return
        agent.last_consumed = slot_at
        claim = answer.json()
        version = claim["release"]["version"]
        agent.note(now, "claim.granted", f"{slot_key}: {agent.installed} -> {version}")
        status, error = await self._download(agent, claim)
        report = await self._request(
            agent,
            "PATCH /v1/agent/runs/{id}",
            "PATCH",
            f"/v1/agent/runs/{claim['run_id']}",
            json={
                "status": status,
                "version": version if status == "succeeded" else agent.installed,
                "error": error,
            },
        )
        if status == "succeeded":
            agent.installed = version
        agent.note(
            _server_now(report, now),
            f"update.{status}",
            f"{slot_key}: now on {agent.installed}" + (f" ({error})" if error else ""),
        )

    async def _download(
        self, agent: SimulatedAgent, claim: dict[str, Any]
    ) -> tuple[str, str | None]:
        """Fetch the run's artifact and check it against the signed manifest."""
        release = claim["release"]
        manifest_bytes = base64.b64decode(release["manifest_b64"])
        try:
            check_signature(
                manifest_bytes, base64.b64decode(release["signature_b64"]), self.trusted_keys
            )
            manifest = parse_manifest(manifest_bytes)
        except ReleaseError as exc:
            return "failed", f"release refused: {exc}"
        answer = await self._request(
            agent, "GET /v1/agent/runs/{id}/artifact", "GET", release["artifact_url"]
        )
        if answer.status_code != 200:
            return "failed", f"artifact download: HTTP {answer.status_code}"
        body = answer.content
        if len(body) != manifest.length or hashlib.sha256(body).hexdigest() != manifest.sha256:
            return "failed", "the artifact is not the signed one"
        return "succeeded", None


def _detail(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        return {}
    detail = body.get("detail") if isinstance(body, dict) else None
    return detail if isinstance(detail, dict) else {}
