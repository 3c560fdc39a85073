"""The agent's side of the HTTP contract: config sync (ETag/304), claims, reports, server time.

One `httpx.Client` is built in one place, `build_http_client`, which accepts a `transport=` so tests
can stand in for the control plane. Every answer carries `X-Nachtwacht-Server-Time`; the agent keeps
the offset between that and its own clock in a `ServerClock`, and plans on it, so a host whose clock
is hours off still updates at 03:00 server time. Foreign errors become the agent's own here:
no answer, a timeout or a 5xx is `ControlPlaneUnreachable` (offline: consume nothing).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urljoin

import httpx
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from agent_daemon.atomic_file import read_versioned_json, write_versioned_json
from agent_daemon.config import describe_validation_error
from agent_daemon.errors import (
    BadServerAnswer,
    ControlPlaneUnreachable,
    CredentialRefused,
    DaemonStateError,
)
from ground.clock import Clock
from ground.contract import SERVER_TIME_HEADER, InstantError, RefusalCode, parse_instant
from shared_planner import parse_times

__all__ = [
    "ClaimGranted",
    "ClaimRefused",
    "ConfigCache",
    "ControlPlaneClient",
    "Delivery",
    "FreshConfig",
    "NotModified",
    "RemoteConfig",
    "ServerClock",
    "build_http_client",
]

USER_AGENT = "nachtwacht-agent"


class ServerClock:
    """The control plane's clock as this host sees it: the program's clock plus a learned offset.

    It satisfies `ground.clock.Clock`, so the updater's expiry checks follow server time too.
    """

    def __init__(self, base: Clock, *, offset: timedelta = timedelta(0)) -> None:
        self._base = base
        self._offset = offset
        self._lock = threading.Lock()

    @property
    def is_fake(self) -> bool:
        return self._base.is_fake

    @property
    def speed(self) -> float:
        return self._base.speed

    @property
    def offset(self) -> timedelta:
        with self._lock:
            return self._offset

    def learn(self, server_time: datetime, *, local_time: datetime) -> None:
        self.learn_offset(server_time - local_time)

    def learn_offset(self, offset: timedelta) -> None:
        with self._lock:
            self._offset = offset

    def now(self) -> datetime:
        return self._base.now() + self.offset

    def host_now(self) -> datetime:
        return self._base.now()

    def real_seconds(self, product_seconds: float) -> float:
        return self._base.real_seconds(product_seconds)

    def sleep(self, product_seconds: float) -> None:
        self._base.sleep(product_seconds)

    def describe(self) -> str:
        return f"{self._base.describe()}, server offset {self.offset.total_seconds():+.0f}s"


def build_http_client(
    *,
    base_url: str,
    credential: str,
    timeout_seconds: float,
    transport: httpx.BaseTransport | None = None,
) -> httpx.Client:
    """The agent's one HTTP client. `timeout_seconds` is real time (the caller converts)."""
    return httpx.Client(
        base_url=base_url,
        headers={"Authorization": f"Bearer {credential}", "User-Agent": USER_AGENT},
        timeout=httpx.Timeout(timeout_seconds),
        transport=transport,
        follow_redirects=False,
    )


class _Model(BaseModel):
    # Unknown fields are ignored: a newer control plane may add some; an older agent must not die.
    model_config = ConfigDict(extra="ignore", frozen=True)


class RemoteSchedule(_Model):
    enabled: bool
    times: tuple[str, ...]

    @model_validator(mode="after")
    def _valid_times(self) -> RemoteSchedule:
        # Switched off, a schedule may hold no times; otherwise the planner's rules apply.
        if self.times or self.enabled:
            parse_times(list(self.times))
        return self


class RemoteBrake(_Model):
    engaged: bool
    reason: str | None = None


class RemoteRelease(_Model):
    version: str
    manifest_version: int
    channel: str | None = None
    platform: str | None = None


class ManualUpdate(_Model):
    run_id: str
    requested_at: datetime | None = None


class RemoteConfig(_Model):
    agent_id: str
    org_id: str | None = None
    name: str | None = None
    schedule: RemoteSchedule
    timezone: str
    catch_up_minutes: int
    brake: RemoteBrake
    release: RemoteRelease | None = None
    manual_update: ManualUpdate | None = None
    server_time: datetime | None = None

    @field_validator("catch_up_minutes")
    @classmethod
    def _sane_window(cls, value: int) -> int:
        if not 0 < value <= 24 * 60:
            raise ValueError("expected minutes between 1 and 1440")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError("expected an IANA time zone such as Europe/Amsterdam") from exc
        return value


class ClaimedRelease(_Model):
    version: str
    manifest_version: int
    manifest_b64: str
    signature_b64: str
    artifact_url: str


class _ClaimBody(_Model):
    run_id: str
    slot_key: str | None = None
    release: ClaimedRelease


@dataclass(frozen=True, kw_only=True)
class FreshConfig:
    config: RemoteConfig
    raw: dict[str, Any]
    etag: str | None


@dataclass(frozen=True, kw_only=True)
class NotModified:
    pass


@dataclass(frozen=True, kw_only=True)
class ClaimGranted:
    run_id: str
    release: ClaimedRelease
    artifact_url: str  # absolute


@dataclass(frozen=True, kw_only=True)
class ClaimRefused:
    status: int
    code: str
    message: str
    retry_after_seconds: float | None = None

    @property
    def consumes_slot(self) -> bool:
        """The server says the slot is gone (the contract's answer; an unknown code keeps it)."""
        try:
            return RefusalCode(self.code).consumes_slot
        except ValueError:
            return False


@dataclass(frozen=True, kw_only=True)
class Delivery:
    outcome: Literal["delivered", "rejected"]
    status: int
    detail: str = ""


def parse_remote_config(document: Any, *, source: str = "GET /v1/agent/config") -> RemoteConfig:
    try:
        return RemoteConfig.model_validate(document)
    except ValidationError as exc:
        raise BadServerAnswer(describe_validation_error(exc, source)) from exc


class ControlPlaneClient:
    """The agent's calls to the control plane; every answer teaches `server_clock` the offset."""

    def __init__(self, *, http: httpx.Client, server_clock: ServerClock) -> None:
        self._http = http
        self._server_clock = server_clock

    def absolute_url(self, path: str) -> str:
        return urljoin(str(self._http.base_url), path)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise ControlPlaneUnreachable(f"{method} {path}: no answer in time ({exc})") from exc
        except httpx.TransportError as exc:
            raise ControlPlaneUnreachable(f"{method} {path}: cannot connect ({exc})") from exc
        self._learn_server_time(response)
        if response.status_code >= 500 and not _is_refusal(response):
            raise ControlPlaneUnreachable(
                f"{method} {path}: the control plane answered {response.status_code}"
            )
        if response.status_code in {401, 403}:
            raise CredentialRefused(
                f"{method} {path}: the control plane refused the agent's credential "
                f"({response.status_code} {_detail_text(response)}); re-enroll the agent"
            )
        return response

    def _learn_server_time(self, response: httpx.Response) -> None:
        value = response.headers.get(SERVER_TIME_HEADER)
        if value is None:
            return
        try:
            server_time = parse_instant(value, field=SERVER_TIME_HEADER)
        except InstantError:
            return
        self._server_clock.learn(server_time, local_time=self._server_clock.host_now())

    def fetch_config(self, *, etag: str | None) -> FreshConfig | NotModified:
        headers = {"If-None-Match": etag} if etag else {}
        response = self._request("GET", "/v1/agent/config", headers=headers)
        if response.status_code == 304:
            return NotModified()
        if response.status_code != 200:
            raise BadServerAnswer(
                f"GET /v1/agent/config: expected 200 or 304, found {response.status_code} "
                f"({_detail_text(response)})"
            )
        document = _json(response, "GET /v1/agent/config")
        config = parse_remote_config(document)
        return FreshConfig(config=config, raw=document, etag=response.headers.get("ETag"))

    def claim(
        self, *, slot_key: str | None, manual_run_id: str | None, from_version: str | None
    ) -> ClaimGranted | ClaimRefused:
        body: dict[str, Any] = {"from_version": from_version}
        if manual_run_id is not None:
            body["manual_run_id"] = manual_run_id
        else:
            body["slot_key"] = slot_key
        response = self._request("POST", "/v1/agent/claims", json=body)
        if response.status_code in {200, 201}:
            try:
                parsed = _ClaimBody.model_validate(_json(response, "POST /v1/agent/claims"))
            except ValidationError as exc:
                raise BadServerAnswer(
                    describe_validation_error(exc, "POST /v1/agent/claims")
                ) from exc
            return ClaimGranted(
                run_id=parsed.run_id,
                release=parsed.release,
                artifact_url=self.absolute_url(parsed.release.artifact_url),
            )
        return _refusal(response)

    def deliver(self, method: str, path: str, body: dict[str, Any]) -> Delivery:
        """Send one report; raises `ControlPlaneUnreachable` when it should be tried again later."""
        response = self._request(method, path, json=body)
        if 200 <= response.status_code < 300:
            return Delivery(outcome="delivered", status=response.status_code)
        if response.status_code in {408, 429} or response.status_code >= 500:
            raise ControlPlaneUnreachable(f"{method} {path}: busy ({response.status_code})")
        return Delivery(
            outcome="rejected", status=response.status_code, detail=_detail_text(response)
        )


def _is_refusal(response: httpx.Response) -> bool:
    """A 503 that carries the contract's `{"detail": {"code": …}}` (the brake), not a dead proxy."""
    return response.status_code == 503 and _detail_code(response) is not None


def _json(response: httpx.Response, source: str) -> Any:
    try:
        return response.json()
    except ValueError as exc:
        raise BadServerAnswer(f"{source}: the answer is not JSON ({exc})") from exc


def _detail(response: httpx.Response) -> Any:
    try:
        document = response.json()
    except ValueError:
        return None
    return document.get("detail") if isinstance(document, dict) else None


def _detail_code(response: httpx.Response) -> str | None:
    detail = _detail(response)
    if isinstance(detail, dict) and isinstance(detail.get("code"), str):
        return str(detail["code"])
    return None


def _detail_text(response: httpx.Response) -> str:
    detail = _detail(response)
    if isinstance(detail, dict):
        return str(detail.get("message") or detail.get("code") or detail)
    if detail is not None:
        return str(detail)[:200]
    return response.text[:200]


def _refusal(response: httpx.Response) -> ClaimRefused:
    detail = _detail(response)
    code = _detail_code(response)
    if code is None:
        raise BadServerAnswer(
            f"POST /v1/agent/claims: expected 201/200 or a refusal with a code, found "
            f"{response.status_code} ({_detail_text(response)})"
        )
    retry_after: float | None = None
    if isinstance(detail, dict) and isinstance(detail.get("retry_after_seconds"), int | float):
        retry_after = float(detail["retry_after_seconds"])
    return ClaimRefused(
        status=response.status_code,
        code=code,
        message=_detail_text(response),
        retry_after_seconds=retry_after,
    )


CACHE_FORMAT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class CachedConfig:
    config: RemoteConfig
    raw: dict[str, Any]
    etag: str | None
    synced_at: datetime  # server time of the last answer
    offset_seconds: float


class ConfigCache:
    """The last config the control plane sent, on disk, so the agent and `status` work offline."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> CachedConfig | None:
        document = read_versioned_json(self.path, format_version=CACHE_FORMAT_VERSION)
        if document is None:
            return None
        try:
            raw = document["config"]
            return CachedConfig(
                config=parse_remote_config(raw, source=str(self.path)),
                raw=raw,
                etag=document.get("etag"),
                synced_at=datetime.fromisoformat(document["synced_at"]),
                offset_seconds=float(document["offset_seconds"]),
            )
        except (KeyError, TypeError, ValueError, BadServerAnswer) as exc:
            raise DaemonStateError(f"{self.path}: not a usable config cache ({exc})") from exc

    def save(self, cached: CachedConfig) -> None:
        write_versioned_json(
            self.path,
            {
                "config": cached.raw,
                "etag": cached.etag,
                "synced_at": cached.synced_at.isoformat(),
                "offset_seconds": cached.offset_seconds,
            },
            format_version=CACHE_FORMAT_VERSION,
        )
