"""Agents simulated in one process, for a fleet too large for one process per agent: the demo above
`--process-limit`, and `bench/fleet.py`.

Each simulated agent runs the real daemon's decision, `agent_daemon.minute.decision.decide`
(which step consumes the slot), reads every answer with the same `agent_daemon.connection.wire`
functions and the contract's models, and ticks once a minute of the shared clock at the daemon's
own second (`second_in_minute`). Only the I/O is its own: asyncio and one `httpx.AsyncClient` per
control plane instead of a process per agent, reports kept in memory instead of an on-disk outbox,
and an update that downloads the artifact and checks it against the signed manifest (signature,
length, sha256) but installs nothing: that is what the real daemons of the demo show.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import threading
import time
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from pydantic import BaseModel

from agent_daemon.connection import wire
from agent_daemon.errors import BadServerAnswer
from agent_daemon.minute.daemon_loop import second_in_minute
from agent_daemon.minute.decision import (
    Action,
    AgentFacts,
    Answer,
    ClaimAnswer,
    ClaimManual,
    ClaimRequestAction,
    ClaimSlot,
    ConfigRejected,
    CredentialRejected,
    EndManual,
    GiveUpSlot,
    Granted,
    NothingToDo,
    Refused,
    StartUpdate,
    TickResult,
    Unreachable,
    Wait,
    decide,
)
from ground.clock import Clock
from ground.contract import (
    CLAIMS_PATH,
    CONFIG_PATH,
    CONTRACT_VERSION,
    CONTRACT_VERSION_HEADER,
    RUNS_PATH,
    SERVER_TIME_HEADER,
    AgentConfig,
    ClaimGrant,
    ClaimRequest,
    NothingToDoReport,
    OutcomeReason,
    OutcomeReport,
    OutcomeStatus,
    artifact_path,
    confirm_path,
    run_path,
)
from signed_release.errors import ReleaseError
from signed_release.manifest import parse_manifest
from signed_release.signature import check_signature

__all__ = ["FleetStats", "JournalEntry", "SimulatedAgent", "SimulatedFleet"]

REQUEST_TIMEOUT_SECONDS = 30.0

# The endpoints as `FleetStats` names them: one label per route, not per run.
CONFIG_ENDPOINT = f"GET {CONFIG_PATH}"
CLAIMS_ENDPOINT = f"POST {CLAIMS_PATH}"
RUNS_ENDPOINT = f"POST {RUNS_PATH}"
OUTCOME_ENDPOINT = f"PATCH {run_path('{id}')}"
ARTIFACT_ENDPOINT = f"GET {artifact_path('{id}')}"
CONFIRM_ENDPOINT = f"POST {confirm_path('{id}')}"

# The journal's words for a minute that ended in `Wait`, the daemon's log events.
_WAIT_EVENTS = {
    "offline": "control_plane.offline",
    "platform_unavailable": "platform.unavailable",
    "credential_refused": "control_plane.credential_refused",
    "bad_config": "config.refused",
    "braked": "claim.braked",
    "throttled": "claim.refused",
    "refused": "claim.refused",
}


@dataclass(frozen=True)
class JournalEntry:
    at: datetime
    event: str
    detail: str = ""


@dataclass(frozen=True)
class _Report:
    method: str
    path: str
    endpoint: str
    body: BaseModel


@dataclass
class SimulatedAgent:
    agent_id: str
    name: str
    org_name: str
    agent_key: str
    installed: str
    base_url: str
    etag: str | None = None
    config: AgentConfig | None = None
    last_consumed: datetime | None = None
    handled_manual_runs: set[str] = field(default_factory=set)
    minutes_since_sync: int = 10**6
    journal: list[JournalEntry] = field(default_factory=list)
    # Reports not delivered yet, oldest first: the daemon's outbox, in memory.
    outbox: list[_Report] = field(default_factory=list)

    def note(self, at: datetime, event: str, detail: str = "") -> None:
        self.journal.append(JournalEntry(at, event, detail))

    def facts(self) -> AgentFacts:
        return AgentFacts(
            last_consumed_at=self.last_consumed,
            installed_version=self.installed,
            handled_manual_runs=frozenset(self.handled_manual_runs),
        )

    def consume(self, at: datetime) -> None:
        # As the daemon's state: consuming an earlier slot never moves the mark back.
        if self.last_consumed is None or at > self.last_consumed:
            self.last_consumed = at


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


# How a simulated update ended: its status, the error and the reason its report carries.
_Ending = tuple[OutcomeStatus, str | None, OutcomeReason | None]


class _Offline(Exception):
    """A request that got no answer (connection refused, timeout)."""


class SimulatedFleet:
    def __init__(
        self,
        agents: Sequence[SimulatedAgent],
        *,
        clock: Clock,
        trusted_keys: Mapping[str, Ed25519PublicKey],
        config_every_minutes: int = 1,
        max_connections: int = 64,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.agents = list(agents)
        self.clock = clock
        self.trusted_keys = dict(trusted_keys)
        self.config_every_minutes = config_every_minutes
        self.stats = FleetStats()
        self._max_connections = max_connections
        self._transport = transport
        self._clients: dict[str, httpx.AsyncClient] = {}
        self._in_flight: asyncio.Semaphore | None = None

    # -- the loop -------------------------------------------------------------------------------

    async def run(self, until: datetime, stop: threading.Event | None = None) -> None:
        async with self.connected():
            await asyncio.gather(*(self._live(agent, until, stop) for agent in self.agents))

    @asynccontextmanager
    async def connected(self) -> AsyncIterator[None]:
        """The fleet's HTTP clients, open; `tick` may be called inside."""
        limits = httpx.Limits(
            max_connections=self._max_connections, max_keepalive_connections=self._max_connections
        )
        # Requests wait here, not in httpx's connection pool: the pool rescans its whole queue on
        # every change, which costs quadratic time with thousands of agents waiting in it.
        self._in_flight = asyncio.Semaphore(self._max_connections)
        for url in {agent.base_url for agent in self.agents}:
            self._clients[url] = httpx.AsyncClient(
                base_url=url,
                timeout=REQUEST_TIMEOUT_SECONDS,
                limits=limits,
                transport=self._transport,
            )
        try:
            yield
        finally:
            for client in self._clients.values():
                await client.aclose()
            self._clients.clear()

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
            await self.tick(agent)

    async def _request(
        self, agent: SimulatedAgent, endpoint: str, method: str, path: str, **kwargs: Any
    ) -> httpx.Response:
        headers = {
            "Authorization": f"Bearer {agent.agent_key}",
            CONTRACT_VERSION_HEADER: str(CONTRACT_VERSION),
            **kwargs.pop("headers", {}),
        }
        assert self._in_flight is not None, "requests are made while the fleet is connected"
        async with self._in_flight:
            started = time.perf_counter()
            try:
                response = await self._clients[agent.base_url].request(
                    method, path, headers=headers, **kwargs
                )
            except httpx.TransportError as exc:
                self.stats.failures[type(exc).__name__] += 1
                raise _Offline(f"{method} {path}: {type(exc).__name__}") from exc
            self.stats.record(endpoint, time.perf_counter() - started, response.status_code)
        return response

    # -- one minute of one agent: the daemon's decide, this fleet's I/O ---------------------------

    async def tick(self, agent: SimulatedAgent) -> TickResult:
        """One minute of `agent`, as the daemon's `tick` would spend it; the same result names."""
        answer: Answer = None
        now: datetime | None = None
        if agent.config is None or agent.minutes_since_sync + 1 >= self.config_every_minutes:
            answer, now = await self._reach(agent)
        else:
            agent.minutes_since_sync += 1
        # The clock is read once: the reach's answer carries the control plane's own.
        now = now or self.clock.now()
        config = None if answer is not None else agent.config
        if config is not None:
            await self._flush_reports(agent, now)
        try:
            action = decide(agent.facts(), config, answer, now)
            while isinstance(action, ClaimSlot | ClaimManual):
                action = decide(agent.facts(), config, await self._claim(agent, action), now)
            return await self._carry_out(agent, action, now)
        except BadServerAnswer as exc:
            agent.note(now, "tick.failed", str(exc))
            return "error"

    async def _reach(self, agent: SimulatedAgent) -> tuple[Answer, datetime | None]:
        try:
            response = await self._request(
                agent,
                CONFIG_ENDPOINT,
                "GET",
                CONFIG_PATH,
                headers={"If-None-Match": agent.etag} if agent.etag else {},
            )
        except _Offline as exc:
            return Unreachable(error=str(exc)), None
        now = wire.server_time(response.headers.get(SERVER_TIME_HEADER))
        status, body = response.status_code, response.content
        if wire.is_offline(status, body):
            platform = wire.error_detail(body) is not None
            return Unreachable(error=f"HTTP {status}", platform=platform), now
        if wire.is_credential_refused(status):
            return CredentialRejected(error=f"HTTP {status}"), now
        if status == HTTPStatus.NOT_MODIFIED and agent.config is not None:
            agent.minutes_since_sync = 0
            return None, now
        if status != HTTPStatus.OK:
            return ConfigRejected(error=f"HTTP {status}"), now
        try:
            config = wire.parse_config(wire.read_json(body, source=wire.CONFIG_SOURCE))
        except BadServerAnswer as exc:
            return ConfigRejected(error=str(exc)), now
        first = agent.config is None
        agent.config, agent.etag = config, response.headers.get("ETag")
        agent.minutes_since_sync = 0
        release = "none" if config.release is None else config.release.version
        agent.note(
            now or self.clock.now(),
            "config.synced" if first else "config.changed",
            f"release {release}",
        )
        return None, now

    async def _claim(self, agent: SimulatedAgent, action: ClaimRequestAction) -> ClaimAnswer:
        if isinstance(action, ClaimSlot):
            request = ClaimRequest(slot_key=action.slot.key, from_version=action.from_version)
        else:
            request = ClaimRequest.model_validate(
                {"manual_run_id": action.run_id, "from_version": action.from_version}
            )
        try:
            response = await self._request(
                agent,
                CLAIMS_ENDPOINT,
                "POST",
                CLAIMS_PATH,
                json=request.model_dump(mode="json", exclude_none=True),
            )
        except _Offline as exc:
            return Unreachable(error=str(exc), request=action)
        status, body = response.status_code, response.content
        if wire.is_offline(status, body):
            platform = wire.error_detail(body) is not None
            return Unreachable(error=f"HTTP {status}", request=action, platform=platform)
        if wire.is_credential_refused(status):
            raise BadServerAnswer(f"{wire.CLAIM_SOURCE}: the credential was refused ({status})")
        answer = wire.claim_answer(status, body)
        if isinstance(answer, ClaimGrant):
            return Granted(request=action, grant=answer)
        return Refused(request=action, detail=answer)

    async def _carry_out(self, agent: SimulatedAgent, action: Action, now: datetime) -> TickResult:
        if isinstance(action, Wait):
            about = action.slot or (
                action.request.slot if isinstance(action.request, ClaimSlot) else None
            )
            code = action.detail.code if action.detail is not None else action.error or ""
            where = f"{about.key}: " if about is not None else ""
            agent.note(now, _WAIT_EVENTS.get(action.reason, action.reason), f"{where}{code}")
            return action.reason
        if isinstance(action, NothingToDo):
            agent.consume(action.slot.at)
            agent.outbox.append(
                _Report(
                    "POST",
                    RUNS_PATH,
                    RUNS_ENDPOINT,
                    NothingToDoReport(
                        slot_key=action.slot.key, status="up_to_date", version=action.version
                    ),
                )
            )
            agent.note(now, "slot.up_to_date", f"{action.slot.key} on {agent.installed}")
            await self._flush_reports(agent, now)
            return "up_to_date"
        if isinstance(action, GiveUpSlot):
            agent.consume(action.slot.at)
            agent.note(now, "claim.slot_gone", f"{action.slot.key}: {action.refusal.value}")
            return "slot_gone"
        if isinstance(action, EndManual):
            agent.handled_manual_runs.add(action.run_id)
            agent.note(now, "manual.refused", f"{action.run_id}: {action.detail.code}")
            return "manual_refused"
        if isinstance(action, StartUpdate):
            await self._update(agent, action, now)
            return "dispatched"
        # ResumeClaim: a simulated agent holds no claim across minutes (it never crashes).
        raise AssertionError(f"decide returned {action!r} to an agent without a stored claim")

    async def _update(self, agent: SimulatedAgent, action: StartUpdate, now: datetime) -> None:
        request, grant = action.request, action.grant
        if isinstance(request, ClaimSlot):
            agent.consume(request.slot.at)
            what = request.slot.key
        else:
            agent.handled_manual_runs.add(request.run_id)
            what = f"manual {request.run_id}"
        version = grant.release.version
        agent.note(now, "claim.granted", f"{what}: {agent.installed} -> {version}")
        status, error, reason = await self._download(agent, grant)
        switched_at = None
        if status == "succeeded":
            # As the daemon does: the switch only with the control plane's permit, asked just
            # before it (a brake, a halt or a closed window in between refuses it).
            status, error, reason = await self._swap_permit(agent, grant)
        if status == "succeeded":
            agent.installed = version
            switched_at = now
        agent.outbox.append(
            _Report(
                "PATCH",
                run_path(grant.run_id),
                OUTCOME_ENDPOINT,
                OutcomeReport(
                    status=status,
                    version=agent.installed,
                    error=error,
                    reason=reason,
                    switched_at=switched_at,
                ),
            )
        )
        agent.note(
            now,
            f"update.{status}",
            f"{what}: now on {agent.installed}" + (f" ({error})" if error else ""),
        )
        await self._flush_reports(agent, now)

    async def _flush_reports(self, agent: SimulatedAgent, now: datetime) -> None:
        """Oldest first; stop at the first the control plane cannot take now (the outbox's rule);
        one refused for good is dropped so it blocks nothing."""
        while agent.outbox:
            report = agent.outbox[0]
            try:
                response = await self._request(
                    agent,
                    report.endpoint,
                    report.method,
                    report.path,
                    json=report.body.model_dump(mode="json"),
                )
            except _Offline:
                agent.note(now, "report.waiting", report.path)
                return
            status = response.status_code
            if (
                status in {HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS}
                or status >= 500
            ):
                agent.note(now, "report.waiting", f"HTTP {status}")
                return
            agent.outbox.pop(0)
            if status >= HTTPStatus.MULTIPLE_CHOICES:
                agent.note(
                    now, "report.rejected", f"HTTP {status}: {wire.detail_text(response.content)}"
                )

    async def _swap_permit(self, agent: SimulatedAgent, grant: ClaimGrant) -> _Ending:
        """`succeeded` when the control plane permits the switch now; else why not, with the
        reason the daemon reports."""
        try:
            answer = await self._request(
                agent, CONFIRM_ENDPOINT, "POST", confirm_path(grant.run_id)
            )
        except _Offline as exc:
            return "failed", f"swap permit: {exc}", OutcomeReason.PLATFORM_UNAVAILABLE
        if answer.status_code != HTTPStatus.OK:
            detail = wire.error_detail(answer.content)
            if detail is None:
                return (
                    "failed",
                    f"swap permit refused (HTTP {answer.status_code})",
                    OutcomeReason.PLATFORM_UNAVAILABLE,
                )
            return (
                "failed",
                f"swap permit refused ({detail.code}): {wire.detail_text(answer.content)}",
                wire.swap_refusal_reason(detail),
            )
        return "succeeded", None, None

    async def _download(self, agent: SimulatedAgent, grant: ClaimGrant) -> _Ending:
        """Fetch the run's artifact and check it against the signed manifest."""
        release = grant.release
        manifest_bytes = base64.b64decode(release.manifest_b64)
        try:
            check_signature(
                manifest_bytes, base64.b64decode(release.signature_b64), self.trusted_keys
            )
            manifest = parse_manifest(manifest_bytes)
        except (ReleaseError, ValueError) as exc:
            return "failed", f"release refused: {exc}", OutcomeReason.VERIFICATION_FAILED
        try:
            answer = await self._request(agent, ARTIFACT_ENDPOINT, "GET", release.artifact_url)
        except _Offline as exc:
            return "failed", f"artifact download: {exc}", OutcomeReason.DOWNLOAD_FAILED
        if answer.status_code != HTTPStatus.OK:
            # A token refused keeps its code, as the daemon's report does.
            detail = wire.error_detail(answer.content)
            code = None if detail is None else detail.code
            reason = (
                OutcomeReason(code)
                if code in {OutcomeReason.TOKEN_REVOKED, OutcomeReason.TOKEN_EXPIRED}
                else OutcomeReason.DOWNLOAD_FAILED
            )
            return "failed", f"artifact download: HTTP {answer.status_code}", reason
        body = answer.content
        if len(body) != manifest.length or hashlib.sha256(body).hexdigest() != manifest.sha256:
            return "failed", "the artifact is not the signed one", OutcomeReason.VERIFICATION_FAILED
        return "succeeded", None, None
