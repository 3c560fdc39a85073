"""The agent's calls to the control plane: config sync (ETag/304), trust roots, claims, the swap's
confirmation, reports.

Foreign errors become the agent's own here (`raise … from exc`): no answer, a timeout or a 5xx that
is not a refusal is `ControlPlaneUnreachable` (offline: consume nothing); 401/403 in the control
plane's words is `CredentialRefused` — except a 403 that names a contract code (`token_revoked`,
`token_expired` on the confirmation): that is the run's answer, not the credential's. A 401/403
in anyone else's words (a proxy or a login page in front of the control plane) is no verdict on the
credential: the control plane was not reached (`ControlPlaneUnreachable`). A 5xx in the contract's
words (`database_unavailable`) keeps its status on the `ControlPlaneUnreachable`: the platform is
unavailable, this host is not offline. An answer no control plane gives (a web page, a bare 404)
is one line saying so (`unexpected_answer`), never the page itself; to the config poll, a claim or
a report, such an answer — a captive portal's page, a redirect — is `ControlPlaneUnreachable`:
the control plane was not reached (`_unless_in_the_way`). Every successful answer
(2xx, 304) teaches the `ServerClock` the control plane's time; an error answer never does (it may
come from anything on the way: a proxy, a half-broken replica). What an answer means is read by
`agent_daemon.connection.wire`, shared with the simulated fleet.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal, TypeVar
from urllib.parse import urljoin

import httpx
from pydantic import BaseModel, ValidationError

from agent_daemon.connection import wire
from agent_daemon.connection.deadline import OWN_CONNECTION, Watchdog
from agent_daemon.connection.http_client import PROXY_EXTENSION
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import (
    BadServerAnswer,
    ControlPlaneUnreachable,
    CredentialRefused,
    describe_validation_error,
)
from ground.contract import (
    CHANNEL_PARAM,
    CLAIMS_PATH,
    CONFIG_PATH,
    DEFAULT_TRACK,
    ENROLL_PATH,
    HOLD_PATH,
    HOST_TIME_HEADER,
    MANUAL_UPDATES_PATH,
    PLATFORM_PARAM,
    SERVER_TIME_HEADER,
    TRUST_ROOT_VERSION_HEADER,
    AgentConfig,
    ClaimGrant,
    ClaimRequest,
    EnrollRequest,
    ErrorDetail,
    HoldRequest,
    HoldView,
    ManualUpdateView,
    ReleaseTrack,
    SwapPermit,
    confirm_path,
    trust_root_path,
)
from ground.contract.plain_text import clipped, shown
from ground.instants import format_http_date

__all__ = ["ControlPlaneClient", "Delivery", "FreshConfig", "NotModified"]

_ModelT = TypeVar("_ModelT", bound=BaseModel)

# How long a request may take whole — connect, response head and body — in request timeouts.
ANSWER_TIMEOUTS = 3

# The new agent and its credential fit in a few hundred bytes; a server that sends more than this
# is not answering an enrollment.
MAX_ENROLL_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True, kw_only=True)
class FreshConfig:
    config: AgentConfig
    raw: dict[str, Any]  # the document as sent, for the cache and `status --json`
    etag: str | None


@dataclass(frozen=True, kw_only=True)
class NotModified:
    pass


@dataclass(frozen=True, kw_only=True)
class Delivery:
    """What became of one report. The client says `delivered` or `rejected` (the control plane's
    answer); the reports' sender may decide `later` (keep it queued, send the rest) or `given_up`
    (set it aside, the control plane would refuse it now: `detail` says why) for a report whose
    route a control plane of the previous release does not have (`minute.reporting`)."""

    outcome: Literal["delivered", "rejected", "later", "given_up"]
    status: int
    detail: str = ""
    # The contract's code of a refusal (e.g. `outcome_not_authorised`), when it named one.
    code: str | None = None


class ControlPlaneClient:
    def __init__(
        self,
        *,
        http: httpx.Client,
        server_clock: ServerClock,
        track: ReleaseTrack = DEFAULT_TRACK,
    ) -> None:
        self._http = http
        self._server_clock = server_clock
        # The (channel, platform) this agent follows: named in every config poll and claim, so
        # the control plane offers only that pair's release.
        self._track = track

    @property
    def server(self) -> str:
        """The control plane's URL as configured, for messages."""
        return str(self._http.base_url).rstrip("/")

    def unexpected_answer(
        self, source: str, response: httpx.Response, *, expected: str
    ) -> BadServerAnswer:
        """An answer that is none of `expected`, in one line: what answered when it is not a
        control plane at all, else the status and the control plane's words."""
        foreign = self._not_a_control_plane(response)
        if foreign is not None:
            return BadServerAnswer(f"{source}: {foreign}")
        status = response.status_code
        if (
            HTTPStatus.MULTIPLE_CHOICES <= status < HTTPStatus.BAD_REQUEST
            and status != HTTPStatus.NOT_MODIFIED
        ):
            where = response.headers.get("location")
            to = "" if where is None else f" to {shown(clipped(where, 200))}"
            return BadServerAnswer(
                f"{source}: expected {expected}, found {_words(response)}{to}, which no control "
                "plane answers; the agent follows no redirect (its credential goes only to the "
                "control URL): is the control URL the control plane's own, with https, or is a "
                "login page in the way?"
            )
        return BadServerAnswer(f"{source}: expected {expected}, found {_words(response)}")

    def _not_a_control_plane(self, response: httpx.Response) -> str | None:
        """What answered, in words, when it is not a control plane at all (a proxy's page, a web
        server); `None` when the answer may be the control plane's."""
        return wire.not_a_control_plane(
            response.status_code,
            response.content,
            content_type=response.headers.get("content-type"),
            server=self.server,
            reason=response.reason_phrase,
            proxy=response.extensions.get(PROXY_EXTENSION),
        )

    def _unless_in_the_way(self, source: str, response: httpx.Response, *, expected: str) -> None:
        """Raises `ControlPlaneUnreachable` for an answer that is plainly not the control plane's:
        a web page (a captive portal's, a login page's, a proxy's), a redirect (never followed), a
        404 or 401/403 without its words. The control plane was not reached, as when nothing
        answers: the minute is offline and consumes nothing, a slot due meanwhile is noted as
        unreachable with these words, and a report waits. A caller that expects a 3xx (the config
        poll's 304) reads it before asking this."""
        status = response.status_code
        in_the_way = HTTPStatus.MULTIPLE_CHOICES <= status < HTTPStatus.BAD_REQUEST
        if in_the_way or self._not_a_control_plane(response) is not None:
            said = self.unexpected_answer(source, response, expected=expected)
            raise ControlPlaneUnreachable(str(said))

    def answer_json(self, source: str, response: httpx.Response) -> Any:
        """The JSON of an answer whose status was expected; a web page is named as what it is."""
        content_type = response.headers.get("content-type")
        if wire.looks_like_html(response.content, content_type):
            raise self.unexpected_answer(source, response, expected="JSON")
        return wire.read_json(response.content, source=source)

    def absolute_url(self, path: str) -> str:
        """`path` resolved against the control plane's URL. Never raises: a value that cannot be
        joined is returned as it came, for the updater to refuse as an outcome."""
        try:
            return urljoin(str(self._http.base_url), path)
        except ValueError:
            return path

    def _request(
        self,
        method: str,
        path: str,
        *,
        coded_refusals: bool = False,
        max_bytes: int = wire.MAX_ANSWER_BYTES,
        **kwargs: Any,
    ) -> httpx.Response:
        """Every answer of the control plane is read bounded (`_bounded_request`): at most
        `max_bytes`, and whole within its time, so no answer holds the minute or the memory."""
        # The host's own clock, for the control plane to tell a host whose clock is too far off
        # (the offset this agent follows is learned from the answer's `SERVER_TIME_HEADER`).
        kwargs["headers"] = {
            HOST_TIME_HEADER: format_http_date(self._server_clock.host_now()),
            **(kwargs.get("headers") or {}),
        }
        try:
            response = self._bounded_request(method, path, max_bytes, **kwargs)
        except httpx.TimeoutException as exc:
            raise ControlPlaneUnreachable(f"{method} {path}: no answer in time ({exc})") from exc
        except (httpx.ConnectError, httpx.ProxyError, httpx.UnsupportedProtocol) as exc:
            raise ControlPlaneUnreachable(f"{method} {path}: cannot connect ({exc})") from exc
        except httpx.TransportError as exc:
            # Connected, and then the connection ended (a proxy or a load balancer closing it, a
            # server that died): the answer, or part of it, never came. Not DNS, not a firewall.
            raise ControlPlaneUnreachable(
                f"{method} {path}: the connection broke off before the whole answer came ({exc})"
            ) from exc
        server_time = wire.server_time(response.headers.get(SERVER_TIME_HEADER))
        if server_time is not None and response.status_code < HTTPStatus.BAD_REQUEST:
            self._server_clock.learn(server_time, local_time=self._server_clock.host_now())
        status, body = response.status_code, response.content
        if wire.is_offline(status, body):
            # The control plane's own words (a contract error, e.g. `database_unavailable`): the
            # platform is unavailable. Anything else (a proxy's 502 page) may be on the way: the
            # proxy that carried the request is named, and the answer's own status phrase kept.
            answered = wire.error_detail(body) is not None
            proxy = response.extensions.get(PROXY_EXTENSION)
            if answered:
                said = f"the control plane answered {_words(response)}"
            elif proxy is not None:
                said = (
                    f"{_words(response)} through the proxy {proxy}, not the control plane's "
                    f"answer (from the proxy, or a server between it and {self.server})"
                )
            else:
                said = f"the server at {self.server} answered {_words(response)}"
            raise ControlPlaneUnreachable(
                f"{method} {path}: {said}", status=status if answered else None
            )
        if coded_refusals and wire.error_detail(body) is not None:
            return response
        if wire.is_credential_refused(status):
            foreign = self._not_a_control_plane(response)
            if foreign is not None:
                # Something in front of the control plane: it was not reached this minute.
                raise ControlPlaneUnreachable(f"{method} {path}: {foreign}")
            words = wire.answer_words(status, body, response.headers.get("content-type"))
            raise CredentialRefused(
                f"{method} {path}: the control plane refused the agent's credential "
                f"({words}); re-enroll the agent",
                answered=words,
            )
        return response

    def _bounded_request(
        self, method: str, path: str, max_bytes: int, **kwargs: Any
    ) -> httpx.Response:
        """The answer, its body read only up to `max_bytes`: a server that sends more is refused
        once that much has come, not read to its end. The whole exchange — connect, response head
        and body — must end within `ANSWER_TIMEOUTS` of the client's timeout: httpx times each
        read on its own, so a head or a body that drips a byte per read would otherwise hold the
        minute for ever. At that time the watchdog shuts the request's own connection down."""
        timeout = self._http.timeout.read or self._http.timeout.connect or 0.0
        total = ANSWER_TIMEOUTS * timeout
        kwargs["headers"] = {**(kwargs.get("headers") or {}), **OWN_CONNECTION}
        with Watchdog(total) as watchdog:
            kwargs["extensions"] = {"trace": watchdog.trace}
            body = bytearray()
            # The answer's head once it came: a body the watchdog cut says how far it came.
            head: httpx.Response | None = None
            try:
                with self._http.stream(method, path, **kwargs) as streamed:
                    head = streamed
                    for chunk in streamed.iter_bytes():
                        body += chunk
                        if len(body) > max_bytes:
                            raise BadServerAnswer(
                                f"{method} {path}: the answer runs past {max_bytes} bytes, at "
                                f"most {max_bytes} expected"
                            )
                        if watchdog.expired:
                            break
                    if watchdog.expired:
                        # An answer whose end the shut connection made (a body without a length
                        # ends at the connection's end) is not the whole answer.
                        raise _late(method, path, total, streamed, len(body))
                    return _kept(streamed, bytes(body))
            except httpx.TransportError as exc:
                if watchdog.expired:
                    raise _late(method, path, total, head, len(body)) from exc
                raise

    def fetch_config(
        self, *, etag: str | None, trust_root_version: int | None = None
    ) -> FreshConfig | NotModified:
        """The config (or 304 for `etag`); `trust_root_version` is the trust root this agent
        holds, told to the control plane with every poll (None: it holds none)."""
        sent_etag = wire.usable_etag(etag)
        headers = {"If-None-Match": sent_etag} if sent_etag else {}
        if trust_root_version is not None:
            headers[TRUST_ROOT_VERSION_HEADER] = str(trust_root_version)
        params = {CHANNEL_PARAM: self._track.channel, PLATFORM_PARAM: self._track.platform}
        response = self._request("GET", CONFIG_PATH, headers=headers, params=params)
        if response.status_code == HTTPStatus.NOT_MODIFIED:
            return NotModified()
        self._unless_in_the_way(wire.CONFIG_SOURCE, response, expected="200 or 304")
        if response.status_code != HTTPStatus.OK:
            raise self.unexpected_answer(wire.CONFIG_SOURCE, response, expected="200 or 304")
        document = self.answer_json(wire.CONFIG_SOURCE, response)
        config = wire.parse_config(document)
        return FreshConfig(
            config=config, raw=document, etag=wire.usable_etag(response.headers.get("ETag"))
        )

    def fetch_trust_root(self, version: int, *, max_bytes: int) -> bytes | None:
        """The exact bytes of trust root `version`, None while it is not published (404). Not
        trusted here: the caller verifies them against the root it holds."""
        path = trust_root_path(version)
        response = self._request("GET", path, max_bytes=max_bytes)
        if response.status_code == HTTPStatus.NOT_FOUND:
            return None
        if response.status_code != HTTPStatus.OK:
            raise self.unexpected_answer(f"GET {path}", response, expected="200 or 404")
        return response.content

    def enroll(self, request: EnrollRequest) -> httpx.Response:
        """The answer to an enrollment token's exchange (this client carries the token as its
        credential), its body bounded; a refusal in the contract's words is returned for the
        caller to word for the admin at the host."""
        return self._request(
            "POST",
            ENROLL_PATH,
            json=request.model_dump(mode="json"),
            coded_refusals=True,
            max_bytes=MAX_ENROLL_ANSWER_BYTES,
        )

    def claim(self, request: ClaimRequest) -> ClaimGrant | ErrorDetail:
        """A grant, or the refusal's detail (its `.refusal` says what it means for the slot)."""
        named = request.model_copy(
            update={"channel": self._track.channel, "platform": self._track.platform}
        )
        # Defaults left out too (`product` "agent"): the body a control plane of an older
        # contract reads, which refuses a field it does not know.
        response = self._request(
            "POST",
            CLAIMS_PATH,
            json=named.model_dump(mode="json", exclude_none=True, exclude_defaults=True),
        )
        expected = "201/200 or a refusal with a code"
        self._unless_in_the_way(wire.CLAIM_SOURCE, response, expected=expected)
        return wire.claim_answer(response.status_code, response.content)

    def confirm_swap(self, run_id: str) -> SwapPermit | ErrorDetail:
        """Immediately before the swap: the permit, or the refusal with its code. Raises
        `ControlPlaneUnreachable` (no answer, a 5xx, `database_unavailable`), `CredentialRefused`
        or `BadServerAnswer`; none of them allows the switch."""
        response = self._request("POST", confirm_path(run_id), coded_refusals=True)
        return wire.confirm_answer(response.status_code, response.content)

    def deliver(self, method: str, path: str, body: dict[str, Any]) -> Delivery:
        """Send one report; raises `ControlPlaneUnreachable` when it should be tried again later:
        the control plane busy, or an answer that is not the control plane's (`_unless_in_the_way`,
        a body past `MAX_ANSWER_BYTES` or one that never ends). Only the control plane's own 4xx
        refuses a report for good (`rejected`)."""
        try:
            response = self._request(method, path, json=body)
        except BadServerAnswer as exc:
            raise ControlPlaneUnreachable(str(exc)) from exc
        status = response.status_code
        if HTTPStatus.OK <= status < HTTPStatus.MULTIPLE_CHOICES:
            return Delivery(outcome="delivered", status=status)
        if status in {HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS} or status >= 500:
            raise ControlPlaneUnreachable(f"{method} {path}: busy ({status})")
        self._unless_in_the_way(f"{method} {path}", response, expected="2xx")
        detail = wire.error_detail(response.content)
        return Delivery(
            outcome="rejected",
            status=status,
            detail=wire.detail_text(response.content),
            code=None if detail is None else detail.code,
        )

    # -- what the person on the host asks for (`nachtwacht agent hold | release-hold | update-now`)

    def set_hold(self, request: HoldRequest) -> HoldView:
        response = self._request("PUT", HOLD_PATH, json=request.model_dump(mode="json"))
        document = self._answer_document(response, "PUT", HOLD_PATH, expected=(HTTPStatus.OK,))
        return _parsed(HoldView, document, source=f"PUT {HOLD_PATH}")

    def release_hold(self) -> None:
        response = self._request("DELETE", HOLD_PATH)
        # 404: nothing was held (or the control plane predates holds, which the message says).
        if response.status_code != HTTPStatus.NO_CONTENT:
            self._answer_document(response, "DELETE", HOLD_PATH, expected=(HTTPStatus.NO_CONTENT,))

    def request_manual_update(self) -> ManualUpdateView:
        """201 a new manual run, 200 the one already pending: either way, the run to follow."""
        response = self._request("POST", MANUAL_UPDATES_PATH)
        expected = (HTTPStatus.CREATED, HTTPStatus.OK)
        document = self._answer_document(response, "POST", MANUAL_UPDATES_PATH, expected=expected)
        return _parsed(ManualUpdateView, document, source=f"POST {MANUAL_UPDATES_PATH}")

    def _answer_document(
        self, response: httpx.Response, method: str, path: str, *, expected: tuple[int, ...]
    ) -> Any:
        """The answer's JSON when its status is one of `expected`, else `BadServerAnswer` saying
        the status and the control plane's own words (a 404 from a control plane without the
        route says so)."""
        source = f"{method} {path}"
        if response.status_code not in expected:
            status, body = response.status_code, response.content
            content_type = response.headers.get("content-type")
            foreign = wire.not_a_control_plane(
                status, body, content_type=content_type, server=self.server
            )
            if (
                foreign is None
                and status == HTTPStatus.NOT_FOUND
                and wire.error_detail(body) is None
            ):
                raise BadServerAnswer(
                    f"{source}: the control plane does not offer this (404); it may be older "
                    "than this agent — upgrade the control plane"
                )
            if foreign is not None:
                raise BadServerAnswer(f"{source}: {foreign}")
            raise BadServerAnswer(
                f"{source}: refused ({wire.answer_words(status, body, content_type)})"
            )
        return self.answer_json(source, response)


def _late(
    method: str, path: str, total: float, response: httpx.Response | None, received: int
) -> ControlPlaneUnreachable:
    """A request that did not end within its total time, saying how far it came."""
    if response is None:
        came = "no whole answer head"
    else:
        came = f"{response.status_code} and {received} bytes of its body"
    proxy = None if response is None else response.extensions.get(PROXY_EXTENSION)
    through = "" if proxy is None else f", through the proxy {proxy}"
    return ControlPlaneUnreachable(
        f"{method} {path}: no whole answer in time (connect, head and body within {total:g} s; "
        f"{came} had come{through})"
    )


def _kept(streamed: httpx.Response, body: bytes) -> httpx.Response:
    """The streamed answer with its whole `body`, for the callers to read as they please."""
    # The body is decoded already: the copy must not claim an encoding or a length. As the bytes
    # came: a header value outside ASCII (a `Server: Café`) is kept as it is, never decoded and
    # encoded again (which fails).
    headers = [
        (name, value)
        for name, value in streamed.headers.raw
        if name.lower() not in {b"content-encoding", b"content-length", b"transfer-encoding"}
    ]
    return httpx.Response(
        streamed.status_code,
        headers=headers,
        content=body,
        request=streamed.request,
        extensions=streamed.extensions,
    )


def _words(response: httpx.Response) -> str:
    """The answer in one line, with the status line's own phrase when it is not the standard one
    (a proxy's `403 Filtered`)."""
    return wire.answer_words(
        response.status_code,
        response.content,
        response.headers.get("content-type"),
        response.reason_phrase,
    )


def _parsed(model: type[_ModelT], document: Any, *, source: str) -> _ModelT:
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        raise BadServerAnswer(describe_validation_error(exc, source)) from exc
