"""An in-memory control plane behind `httpx.MockTransport`, for the daemon's unit tests.

It follows the agent contract in docs/architecture.md closely enough to test the agent's side of
each answer: ETag/304, `X-Nachtwacht-Server-Time` on every answer, claims re-checked with the
planner on the server's clock (not_a_slot, window_closed, slot_consumed), the brake (503), a full
cap (429), idempotent claims and run reports. The end-to-end tests use the real control plane.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import httpx

from shared_planner import slots_between

MANIFEST = b'{"agent_version": "1.5.0", "manifest_version": 42}'
SIGNATURE = b'{"key_id": "k", "signature": "s"}'


@dataclass
class Run:
    run_id: str
    trigger: str
    slot_key: str | None
    status: str
    version: str | None = None
    error: str | None = None


@dataclass
class FakeControlPlane:
    now: Callable[[], datetime]
    agent_id: str = "4b1c9a6e-0000-4000-8000-000000000001"
    times: tuple[str, ...] = ("03:00",)
    enabled: bool = True
    timezone: str = "Europe/Amsterdam"
    catch_up_minutes: int = 15
    release_version: str | None = "1.5.0"
    online: bool = True
    brake: bool = False
    brake_in_config: bool = False
    cap_full: bool = False
    reports_fail: bool = False
    manual_run_id: str | None = None
    config_body: bytes | None = None  # answered verbatim instead of the real config
    config_status: int = 200
    server_catch_up_minutes: int | None = None  # the server's own window, when it differs
    runs: dict[str, Run] = field(default_factory=dict)
    consumed_at: datetime | None = None
    requests: list[str] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    # -- what a test asserts on ------------------------------------------------------------------

    def claims(self) -> list[str]:
        return [r for r in self.requests if r.startswith("POST /v1/agent/claims")]

    def runs_with(self, status: str) -> list[Run]:
        return [run for run in self.runs.values() if run.status == status]

    # -- the contract ----------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "org_id": "org-1",
            "name": "web-01",
            "schedule": {"enabled": self.enabled, "times": list(self.times)},
            "timezone": self.timezone,
            "catch_up_minutes": self.catch_up_minutes,
            "brake": {
                "engaged": self.brake_in_config,
                "reason": "test" if self.brake_in_config else None,
            },
            "release": None
            if self.release_version is None
            else {
                "version": self.release_version,
                "manifest_version": 42,
                "channel": "stable",
                "platform": "linux-x86_64",
            },
            "manual_update": None
            if self.manual_run_id is None
            else {"run_id": self.manual_run_id, "requested_at": "2026-11-30T01:00:00Z"},
        }

    def _answer(self, status: int, body: Any = None, **headers: str) -> httpx.Response:
        stamp = self.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        all_headers = {"X-Nachtwacht-Server-Time": stamp, **headers}
        if body is None:
            return httpx.Response(status, headers=all_headers)
        return httpx.Response(status, json=body, headers=all_headers)

    def handle(self, request: httpx.Request) -> httpx.Response:
        line = f"{request.method} {request.url.path}"
        self.requests.append(line)
        if not self.online:
            raise httpx.ConnectError("connection refused", request=request)
        if request.headers.get("Authorization") != "Bearer nwa_test_credential":
            return self._answer(401, {"detail": "unknown credential"})
        if line == "GET /v1/agent/config":
            return self._get_config(request)
        body = json.loads(request.content or b"{}")
        if line == "POST /v1/agent/claims":
            return self._claim(body)
        if self.reports_fail:
            return self._answer(503, {"detail": "database unavailable"})
        if line == "POST /v1/agent/runs":
            return self._up_to_date(body)
        if request.method == "PATCH" and request.url.path.startswith("/v1/agent/runs/"):
            return self._outcome(request.url.path.rsplit("/", 1)[1], body)
        return self._answer(404, {"detail": "no such endpoint"})

    def _get_config(self, request: httpx.Request) -> httpx.Response:
        if self.config_body is not None:
            return httpx.Response(
                self.config_status, content=self.config_body, headers={"ETag": '"raw"'}
            )
        config = self._config()
        etag = '"' + hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest() + '"'
        if request.headers.get("If-None-Match") == etag:
            return self._answer(304, ETag=etag)
        config["server_time"] = self.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        return self._answer(200, config, ETag=etag)

    def _slot_check(self, key: str) -> tuple[int, str] | None:
        now = self.now()
        window = timedelta(minutes=self.server_catch_up_minutes or self.catch_up_minutes)
        nearby = slots_between(
            self.times, start=now - timedelta(days=2), end=now + timedelta(days=2), tz=self.timezone
        )
        slot = next((s for s in nearby if s.key == key), None)
        if slot is None:
            return 422, "not_a_slot"
        if self.consumed_at is not None and slot.at <= self.consumed_at:
            return 409, "slot_consumed"
        if not slot.at <= now < slot.at + window:
            return 409, "window_closed"
        return None

    def _consume(self, key: str) -> None:
        now = self.now()
        nearby = slots_between(
            self.times, start=now - timedelta(days=2), end=now + timedelta(days=1), tz=self.timezone
        )
        at = next(s.at for s in nearby if s.key == key)
        self.consumed_at = at if self.consumed_at is None else max(self.consumed_at, at)

    def _claim(self, body: dict[str, Any]) -> httpx.Response:
        manual = body.get("manual_run_id")
        key = body.get("slot_key")
        existing = next(
            (
                r
                for r in self.runs.values()
                if (manual and r.run_id == manual) or (key and r.slot_key == key)
            ),
            None,
        )
        if existing is not None and existing.status == "claimed":
            return self._answer(200, self._grant(existing))
        if manual:
            if manual != self.manual_run_id or existing is not None:
                return self._refuse(409, "not_requested")
            run = Run(run_id=manual, trigger="manual", slot_key=None, status="claimed")
            self.runs[run.run_id] = run
            return self._answer(201, self._grant(run))
        problem = self._slot_check(str(key))
        if problem is not None:
            return self._refuse(*problem)
        if self.brake:
            return self._refuse(503, "brake")
        if self.cap_full:
            return self._refuse(429, "org_cap", retry_after_seconds=42)
        run = Run(run_id=str(uuid.uuid4()), trigger="schedule", slot_key=key, status="claimed")
        self.runs[run.run_id] = run
        self._consume(str(key))
        return self._answer(201, self._grant(run))

    def _grant(self, run: Run) -> dict[str, Any]:
        return {
            "run_id": run.run_id,
            "slot_key": run.slot_key,
            "token": {"id": "token-" + run.run_id, "expires_at": "2099-01-01T00:00:00Z"},
            "release": {
                "version": self.release_version,
                "manifest_version": 42,
                "manifest_b64": base64.b64encode(MANIFEST).decode(),
                "signature_b64": base64.b64encode(SIGNATURE).decode(),
                "artifact_url": f"/v1/agent/runs/{run.run_id}/artifact",
            },
        }

    def _refuse(self, status: int, code: str, **extra: Any) -> httpx.Response:
        return self._answer(
            status, {"detail": {"code": code, "message": f"refused: {code}", **extra}}
        )

    def _up_to_date(self, body: dict[str, Any]) -> httpx.Response:
        key = str(body["slot_key"])
        existing = next((r for r in self.runs.values() if r.slot_key == key), None)
        if existing is not None:
            return self._answer(200, {"run_id": existing.run_id})
        problem = self._slot_check(key)
        if problem is not None:
            return self._refuse(*problem)
        run = Run(
            run_id=str(uuid.uuid4()),
            trigger="schedule",
            slot_key=key,
            status="up_to_date",
            version=body.get("version"),
        )
        self.runs[run.run_id] = run
        self._consume(key)
        return self._answer(201, {"run_id": run.run_id})

    def _outcome(self, run_id: str, body: dict[str, Any]) -> httpx.Response:
        run = self.runs.get(run_id)
        if run is None:
            return self._answer(404, {"detail": "no such run"})
        if run.status not in {"claimed", body["status"]}:
            return self._refuse(409, "not_claimed")
        run.status = body["status"]
        run.version = body.get("version")
        run.error = body.get("error")
        return self._answer(200, {"run_id": run_id, "status": run.status})
