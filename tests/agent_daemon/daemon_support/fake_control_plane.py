"""An in-memory control plane behind `httpx.MockTransport`, for the daemon's unit tests.

It answers with the contract's models and codes (`ground.contract`), never with its own spelling:
ETag/304, `SERVER_TIME_HEADER` on every answer, claims re-checked against the server's clock with
the planner's own slot lookup (`slot_for_key`), the brake (503), a full cap (429), idempotent claims
and run reports. `refuse_claims_with` makes every claim answer one code (a `RefusalCode`, an
unknown one, or `database_unavailable`), so a test can show each code's effect on the slot. The
end-to-end tests use the real control plane.

The swap's confirmation: `POST confirm_path(run_id)` answers a `SwapPermit` while the
run's token is good and its window open; `revoke(run_id)` makes it (and the artifact) answer 403
`token_revoked`; `confirm_unavailable` answers 503 `database_unavailable`. An outcome that
reports a switch the fake did not permit is refused 409 `outcome_not_authorised` and recorded as
`unauthorised`, as the real control plane does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Any

import httpx
from pydantic import BaseModel

from ground.contract import (
    CLAIMS_PATH,
    CONFIG_PATH,
    HOLD_PATH,
    MANUAL_UPDATES_PATH,
    RUNS_PATH,
    SERVER_TIME_HEADER,
    TRUST_ROOT_VERSION_HEADER,
    TRUST_ROOTS_PATH,
    UNREACHABLE_PATH,
    AgentConfig,
    AnswerCode,
    BrakeView,
    ClaimedRelease,
    ClaimGrant,
    ClaimRequest,
    ErrorAnswer,
    ErrorDetail,
    HoldRequest,
    HoldView,
    ManualUpdateView,
    NothingToDoReport,
    OutcomeReport,
    RefusalCode,
    ReleaseView,
    ScheduleView,
    SwapPermit,
    TokenView,
    artifact_path,
    confirm_path,
    format_instant,
)
from shared_planner import InvalidPlanningInput, slot_for_key

MANIFEST = b'{"agent_version": "1.5.0", "manifest_version": 42}'
SIGNATURE = b'{"key_id": "k", "signature": "s"}'
CREDENTIAL = "nwa_test_credential"
ORG_ID = "6f1c0000-0000-4000-8000-000000000001"
TOKEN_LIFETIME = timedelta(hours=1)


@dataclass
class Run:
    run_id: str
    trigger: str
    slot_key: str | None
    status: str
    version: str | None = None
    error: str | None = None
    reason: str | None = None
    switched_at: datetime | None = None
    # None while the token is good; else the code its requests are refused with.
    revoked: str | None = None
    permitted: bool = False
    confirms: int = 0


@dataclass(frozen=True)
class ClaimRefusal:
    """How every claim is answered while set: a code and the status it goes with."""

    code: str
    status: int

    @classmethod
    def of(cls, code: RefusalCode) -> ClaimRefusal:
        return cls(code=code.value, status=code.status)


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
    hold: HoldView | None = None
    config_body: bytes | None = None  # answered verbatim instead of the real config
    config_status: int = HTTPStatus.OK
    server_catch_up_minutes: int | None = None  # the server's own window, when it differs
    refuse_claims_with: ClaimRefusal | None = None
    confirm_unavailable: bool = False
    runs: dict[str, Run] = field(default_factory=dict)
    consumed_at: datetime | None = None
    requests: list[str] = field(default_factory=list)
    # Published trust roots by version (the config names the newest), and the version each config
    # poll said it held (None: the header was absent).
    trust_roots: dict[int, bytes] = field(default_factory=dict)
    told_trust_roots: list[str | None] = field(default_factory=list)
    # The contract the config says this control plane speaks (None: one from before the field).
    contract_version: int | None = None
    # Every outcome report's body as it came, in order.
    outcome_bodies: list[dict[str, Any]] = field(default_factory=list)
    # The outcome reasons the replica answering the reports knows (None: all of this contract's);
    # another is a 422, as a replica of an older release answers it.
    outcome_reasons_known: frozenset[str] | None = None
    # Something on the way answers every request with this status and its own page (a load
    # balancer with no replica behind it: 502), or with the contract's `database_unavailable`
    # (`answered_by_us`): the control plane itself answered, its database down.
    gateway_status: int | None = None
    # Only the claims find nothing answering (a load balancer flapping between the poll and it).
    claims_unreachable: bool = False
    answered_by_us: bool = False
    # Every `UnreachableReport` body as it came, in order (answered only from contract 7 on; an
    # older control plane knows no such path: 404).
    unreachable_bodies: list[dict[str, Any]] = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    # -- what a test asserts on ------------------------------------------------------------------

    def claims(self) -> list[str]:
        return [r for r in self.requests if r.startswith(f"POST {CLAIMS_PATH}")]

    def runs_with(self, status: str) -> list[Run]:
        return [run for run in self.runs.values() if run.status == status]

    def confirms(self) -> list[str]:
        return [r for r in self.requests if r.startswith("POST ") and r.endswith("/confirm")]

    def revoke(self, run_id: str, code: AnswerCode = AnswerCode.TOKEN_REVOKED) -> None:
        """The brake's `revoke_outstanding`, a halt or a withdrawal: the token is no good now."""
        self.runs[run_id].revoked = code.value

    # -- the contract ----------------------------------------------------------------------------

    def config(self) -> AgentConfig:
        return AgentConfig(
            agent_id=uuid.UUID(self.agent_id),
            org_id=uuid.UUID(ORG_ID),
            name="web-01",
            schedule=ScheduleView(enabled=self.enabled, times=self.times),
            timezone=self.timezone,
            catch_up_minutes=self.catch_up_minutes,
            brake=BrakeView(
                engaged=self.brake_in_config, reason="test" if self.brake_in_config else None
            ),
            release=None
            if self.release_version is None
            else ReleaseView(
                version=self.release_version,
                manifest_version=42,
                channel="stable",
                platform="linux-x86_64",
            ),
            manual_update=None
            if self.manual_run_id is None
            else ManualUpdateView(run_id=uuid.UUID(self.manual_run_id)),
            hold=self.hold,
            trust_root_version=max(self.trust_roots, default=None),
            contract_version=self.contract_version,
        )

    def _answer(self, status: int, body: BaseModel | None = None, **headers: str) -> httpx.Response:
        all_headers = {SERVER_TIME_HEADER: format_instant(self.now()), **headers}
        if body is None:
            return httpx.Response(status, headers=all_headers)
        return httpx.Response(status, json=body.model_dump(mode="json"), headers=all_headers)

    def _refuse(self, status: int, code: str, **extra: Any) -> httpx.Response:
        detail = ErrorDetail(code=code, message=f"refused: {code}", **extra)
        return self._answer(status, ErrorAnswer(detail=detail))

    def handle(self, request: httpx.Request) -> httpx.Response:
        line = f"{request.method} {request.url.path}"
        self.requests.append(line)
        if not self.online:
            raise httpx.ConnectError("connection refused", request=request)
        if self.gateway_status is not None:
            if self.answered_by_us:
                return self._refuse(self.gateway_status, AnswerCode.DATABASE_UNAVAILABLE.value)
            return httpx.Response(
                self.gateway_status,
                content=b"<html><body><h1>502 Bad Gateway</h1></body></html>",
                headers={"Content-Type": "text/html"},
            )
        if request.headers.get("Authorization") != f"Bearer {CREDENTIAL}":
            # The control plane's 401 carries a plain message, no code (control_plane/errors.py).
            return httpx.Response(
                HTTPStatus.UNAUTHORIZED,
                json={"detail": "unknown credential"},
                headers={SERVER_TIME_HEADER: format_instant(self.now())},
            )
        if line == f"GET {CONFIG_PATH}":
            self.told_trust_roots.append(request.headers.get(TRUST_ROOT_VERSION_HEADER))
            return self._get_config(request)
        if request.method == "GET" and request.url.path.startswith(f"{TRUST_ROOTS_PATH}/"):
            version = request.url.path.rsplit("/", 1)[1]
            body = self.trust_roots.get(int(version)) if version.isdigit() else None
            if body is None:
                return self._answer(HTTPStatus.NOT_FOUND)
            return httpx.Response(HTTPStatus.OK, content=body)
        body = json.loads(request.content or b"{}")
        if line == f"POST {CLAIMS_PATH}":
            if self.claims_unreachable:
                raise httpx.ConnectError("connection reset by peer", request=request)
            return self._claim(ClaimRequest.model_validate(body))
        if request.url.path in {HOLD_PATH, MANUAL_UPDATES_PATH}:
            return self._host_request(request.method, request.url.path, body, request.content)
        if request.method == "POST" and request.url.path.endswith("/confirm"):
            return self._confirm(request.url.path.split("/")[-2])
        if self.reports_fail:
            return self._refuse(
                HTTPStatus.SERVICE_UNAVAILABLE, AnswerCode.DATABASE_UNAVAILABLE.value
            )
        if line == f"POST {UNREACHABLE_PATH}" and (self.contract_version or 0) >= 7:
            self.unreachable_bodies.append(body)
            return httpx.Response(
                HTTPStatus.OK,
                json={"slot_key": body["slot_key"], "result": "corrected", "message": "ok"},
            )
        if line == f"POST {RUNS_PATH}":
            return self._up_to_date(NothingToDoReport.model_validate(body))
        if request.method == "PATCH" and request.url.path.startswith(f"{RUNS_PATH}/"):
            run_id = request.url.path.rsplit("/", 1)[1]
            self.outcome_bodies.append(body)
            known = self.outcome_reasons_known
            if known is not None and body.get("reason") not in known | {None}:
                return self._refuse(HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_request")
            return self._outcome(run_id, OutcomeReport.model_validate(body))
        return self._answer(HTTPStatus.NOT_FOUND)

    def _host_request(self, method: str, path: str, body: Any, content: bytes) -> httpx.Response:
        """What `nachtwacht agent hold | release-hold | update-now` ask (the contract's
        HOLD_PATH and MANUAL_UPDATES_PATH, which takes no body: one is a 422, as on the real
        control plane)."""
        if (method, path) == ("PUT", HOLD_PATH):
            held = HoldRequest.model_validate(body)
            if held.until <= self.now():
                return self._refuse(HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_request")
            self.hold = HoldView(until=held.until, reason=held.reason, set_by="agent")
            return self._answer(HTTPStatus.OK, self.hold)
        if (method, path) == ("DELETE", HOLD_PATH):
            if self.hold is None:
                return self._refuse(HTTPStatus.NOT_FOUND, "not_held")
            self.hold = None
            return self._answer(HTTPStatus.NO_CONTENT)
        if (method, path) == ("POST", MANUAL_UPDATES_PATH):
            if content:
                return self._refuse(HTTPStatus.UNPROCESSABLE_ENTITY, "invalid_request")
            pending = self.manual_run_id is not None and self.manual_run_id not in self.runs
            if not pending:
                self.manual_run_id = str(uuid.uuid4())
            view = ManualUpdateView(run_id=uuid.UUID(str(self.manual_run_id)))
            return self._answer(HTTPStatus.OK if pending else HTTPStatus.CREATED, view)
        return self._answer(HTTPStatus.METHOD_NOT_ALLOWED)

    def _get_config(self, request: httpx.Request) -> httpx.Response:
        if self.config_body is not None:
            return httpx.Response(
                self.config_status, content=self.config_body, headers={"ETag": '"raw"'}
            )
        config = self.config()
        document = json.dumps(config.model_dump(mode="json"), sort_keys=True).encode()
        etag = '"' + hashlib.sha256(document).hexdigest() + '"'
        if request.headers.get("If-None-Match") == etag:
            return self._answer(HTTPStatus.NOT_MODIFIED, ETag=etag)
        fresh = config.model_copy(update={"server_time": self.now()})
        return self._answer(HTTPStatus.OK, fresh, ETag=etag)

    def _slot_at(self, key: str) -> datetime | None:
        try:
            slot = slot_for_key(self.times, key, tz=self.timezone)
        except InvalidPlanningInput:
            return None
        return None if slot is None else slot.at

    def _slot_check(self, key: str) -> RefusalCode | None:
        now = self.now()
        window = timedelta(minutes=self.server_catch_up_minutes or self.catch_up_minutes)
        at = self._slot_at(key)
        if at is None:
            return RefusalCode.NOT_A_SLOT
        if self.consumed_at is not None and at <= self.consumed_at:
            return RefusalCode.SLOT_CONSUMED
        if not at <= now < at + window:
            return RefusalCode.WINDOW_CLOSED
        return None

    def _consume(self, key: str) -> None:
        at = self._slot_at(key)
        assert at is not None, "only a checked slot is consumed"
        self.consumed_at = at if self.consumed_at is None else max(self.consumed_at, at)

    def _claim(self, body: ClaimRequest) -> httpx.Response:
        if self.refuse_claims_with is not None:
            refusal = self.refuse_claims_with
            return self._refuse(refusal.status, refusal.code)
        manual = None if body.manual_run_id is None else str(body.manual_run_id)
        key = body.slot_key
        existing = next(
            (
                r
                for r in self.runs.values()
                if (manual and r.run_id == manual) or (key and r.slot_key == key)
            ),
            None,
        )
        if existing is not None and existing.status == "claimed":
            return self._answer(HTTPStatus.OK, self._grant(existing))
        if manual:
            if existing is not None:
                return self._refuse_code(RefusalCode.RUN_FINISHED)
            if manual != self.manual_run_id:
                return self._refuse_code(RefusalCode.RUN_NOT_FOUND)
            run = Run(run_id=manual, trigger="manual", slot_key=None, status="claimed")
            self.runs[run.run_id] = run
            return self._answer(HTTPStatus.CREATED, self._grant(run))
        problem = self._slot_check(str(key))
        if problem is not None:
            return self._refuse_code(problem)
        if self.brake:
            return self._refuse_code(RefusalCode.BRAKE)
        if self.cap_full:
            return self._refuse_code(RefusalCode.ORG_CAP, retry_after_seconds=42)
        run = Run(run_id=str(uuid.uuid4()), trigger="schedule", slot_key=key, status="claimed")
        self.runs[run.run_id] = run
        self._consume(str(key))
        return self._answer(HTTPStatus.CREATED, self._grant(run))

    def _refuse_code(self, code: RefusalCode, **extra: Any) -> httpx.Response:
        return self._refuse(code.status, code.value, **extra)

    def _grant(self, run: Run) -> ClaimGrant:
        assert self.release_version is not None, "a claim is granted only with a release"
        return ClaimGrant(
            run_id=uuid.UUID(run.run_id),
            slot_key=run.slot_key,
            token=TokenView(
                id=uuid.uuid5(uuid.NAMESPACE_URL, run.run_id),
                expires_at=self.now() + TOKEN_LIFETIME,
            ),
            release=ClaimedRelease(
                version=self.release_version,
                manifest_version=42,
                manifest_b64=base64.b64encode(MANIFEST).decode(),
                signature_b64=base64.b64encode(SIGNATURE).decode(),
                artifact_url=artifact_path(run.run_id),
            ),
        )

    def _up_to_date(self, body: NothingToDoReport) -> httpx.Response:
        key = body.slot_key
        existing = next((r for r in self.runs.values() if r.slot_key == key), None)
        if existing is not None:
            return self._answer(HTTPStatus.OK, _RunAnswer(run_id=existing.run_id))
        problem = self._slot_check(key)
        if problem is not None:
            return self._refuse_code(problem)
        run = Run(
            run_id=str(uuid.uuid4()),
            trigger="schedule",
            slot_key=key,
            status="up_to_date",
            version=body.version,
        )
        self.runs[run.run_id] = run
        self._consume(key)
        return self._answer(HTTPStatus.CREATED, _RunAnswer(run_id=run.run_id))

    def _window_closes_at(self, run: Run) -> datetime | None:
        if run.slot_key is None:
            return None
        at = self._slot_at(run.slot_key)
        assert at is not None, "a scheduled run has a slot"
        return at + timedelta(minutes=self.server_catch_up_minutes or self.catch_up_minutes)

    def _confirm(self, run_id: str) -> httpx.Response:
        assert confirm_path(run_id).endswith(f"{run_id}/confirm")
        run = self.runs.get(run_id)
        if run is None:
            return self._refuse(HTTPStatus.NOT_FOUND, AnswerCode.RUN_NOT_FOUND.value)
        run.confirms += 1
        if self.confirm_unavailable:
            return self._refuse(
                HTTPStatus.SERVICE_UNAVAILABLE, AnswerCode.DATABASE_UNAVAILABLE.value
            )
        if run.revoked is not None:
            return self._refuse(HTTPStatus.FORBIDDEN, run.revoked)
        closes = self._window_closes_at(run)
        if closes is not None and self.now() >= closes:
            return self._refuse_code(RefusalCode.WINDOW_CLOSED)
        run.permitted = True
        permit = SwapPermit(
            run_id=uuid.UUID(run_id),
            token=TokenView(
                id=uuid.uuid5(uuid.NAMESPACE_URL, run_id),
                expires_at=self.now() + TOKEN_LIFETIME,
            ),
            window_closes_at=closes,
        )
        return self._answer(HTTPStatus.OK, permit)

    def _outcome(self, run_id: str, body: OutcomeReport) -> httpx.Response:
        run = self.runs.get(run_id)
        if run is None:
            return self._refuse(HTTPStatus.NOT_FOUND, AnswerCode.RUN_NOT_FOUND.value)
        if run.status not in {"claimed", body.status}:
            return self._refuse(HTTPStatus.CONFLICT, AnswerCode.RUN_NOT_CLAIMED.value)
        if body.switched_at is not None and not run.permitted:
            run.status = "unauthorised"
            run.switched_at = body.switched_at
            return self._refuse(HTTPStatus.CONFLICT, AnswerCode.OUTCOME_NOT_AUTHORISED.value)
        run.status = body.status
        run.version = body.version
        run.error = body.error
        run.reason = None if body.reason is None else body.reason.value
        run.switched_at = body.switched_at
        return self._answer(HTTPStatus.OK, _RunAnswer(run_id=run_id, status=run.status))


class _RunAnswer(BaseModel):
    # The run endpoints' answer: the contract names no model for it, and the agent reads only
    # the status code.
    run_id: str
    status: str | None = None
