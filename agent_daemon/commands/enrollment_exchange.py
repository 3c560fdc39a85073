"""An enrollment token exchanged for the agent's own credential (`POST ENROLL_PATH`): the one
request `install` makes with the token, through the same client, proxy and trust as every other
(and so with the same handling of timeouts, proxies and answers that come from no control plane).

`enrolled_agent` reads a control plane's answer (pure: status and body in); each refusal the
contract names is one line for the admin at the host, saying what to do next.
"""

from __future__ import annotations

from collections.abc import Mapping
from http import HTTPStatus

from pydantic import ValidationError

from agent_daemon.connection import wire
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import (
    BadServerAnswer,
    ControlPlaneUnreachable,
    EnrollmentRefused,
    describe_validation_error,
)
from agent_daemon.settings import AgentSettings
from ground.contract import (
    AGENT_CREDENTIAL_PREFIX,
    ENROLL_PATH,
    AnswerCode,
    EnrolledAgent,
    EnrollRequest,
)

__all__ = ["enrolled_agent", "exchange_token"]

_SOURCE = f"POST {ENROLL_PATH}"
_ASK_AGAIN = "ask whoever gave it to you for a new one"
# Each refusal's flag, and the line when the control plane sent no message of its own.
_OWN_WORDS = {
    AnswerCode.ENROLLMENT_TOKEN_REFUSED.value: (
        "--enrollment-token",
        f"the control plane does not know this enrollment token, or it was revoked: {_ASK_AGAIN}",
    ),
    AnswerCode.ENROLLMENT_TOKEN_EXPIRED.value: (
        "--enrollment-token",
        f"the enrollment token has expired: {_ASK_AGAIN}",
    ),
    AnswerCode.ENROLLMENT_TOKEN_USED_UP.value: (
        "--enrollment-token",
        f"the enrollment token has no use left: {_ASK_AGAIN}",
    ),
    AnswerCode.AGENT_NAME_NOT_ALLOWED.value: (
        "--name",
        "{name!r} does not match the enrollment token's name pattern: give a name that does",
    ),
    AnswerCode.AGENT_EXISTS.value: (
        "--name",
        "the organisation already has an agent named {name!r}: choose another name",
    ),
}


def exchange_token(
    *,
    settings: AgentSettings,
    token: str,
    request: EnrollRequest,
    clock: ServerClock,
    environ: Mapping[str, str],
) -> EnrolledAgent:
    """The new agent and its credential, or a `ControlPlaneError` whose message is the line to
    show. `settings` give the URL, proxy and trust (their credential is not sent)."""
    with build_http_client(
        base_url=settings.control_url,
        credential=token,
        timeout_seconds=clock.real_seconds(settings.request_timeout_seconds),
        network=settings.network,
        environ=environ,
    ) as http:
        client = ControlPlaneClient(http=http, server_clock=clock)
        response = client.enroll(request)
        status, body = response.status_code, response.content
        if status != HTTPStatus.NOT_FOUND and wire.error_detail(body) is None:
            # A captive portal, a proxy's page, a web server that is not a control plane: named as
            # what it is, never shown.
            foreign = wire.not_a_control_plane(
                status,
                body,
                content_type=response.headers.get("content-type"),
                server=client.server,
            )
            if foreign is not None:
                raise BadServerAnswer(f"{_SOURCE}: {foreign}")
    return enrolled_agent(status, body, name=request.name)


def enrolled_agent(status: int, body: bytes, *, name: str) -> EnrolledAgent:
    if status == HTTPStatus.CREATED:
        document = wire.read_json(body, source=_SOURCE)
        try:
            enrolled = EnrolledAgent.model_validate(document)
        except ValidationError as exc:
            raise BadServerAnswer(describe_validation_error(exc, _SOURCE)) from exc
        if not enrolled.credential.startswith(AGENT_CREDENTIAL_PREFIX):
            raise BadServerAnswer(
                f"{_SOURCE}: credential: expected an agent credential starting with "
                f"{AGENT_CREDENTIAL_PREFIX} (not shown)"
            )
        return enrolled
    detail = wire.error_detail(body)
    if wire.is_offline(status, body):
        raise ControlPlaneUnreachable(
            f"{_SOURCE}: the control plane answered {status} ({wire.detail_text(body)})",
            status=status if detail is not None else None,
        )
    if detail is None:
        if status == HTTPStatus.NOT_FOUND:
            raise BadServerAnswer(
                f"{_SOURCE}: the control plane does not offer enrollment tokens (404); it may be "
                "older than this agent — upgrade it, or enroll with a credential (`nachtwacht "
                "agent enroll --credential …`)"
            )
        raise BadServerAnswer(
            f"{_SOURCE}: expected 201 with the new agent, found {status} ({wire.detail_text(body)})"
        )
    fallback = _OWN_WORDS.get(detail.code)
    if fallback is None:
        said = f" ({detail.message})" if detail.message else ""
        if status == HTTPStatus.UNPROCESSABLE_ENTITY:
            raise EnrollmentRefused(f"--name: the control plane refused {name!r}{said}")
        raise EnrollmentRefused(f"{_SOURCE}: refused ({status} {detail.code}){said}")
    flag, words = fallback
    # The control plane words each of these refusals as the host's one line; its own words
    # stand in when it sent none.
    said = " ".join(detail.message.split())  # one line, whatever was sent
    # Its words name the request's field (`name: found 'web-01' — …`): here the flag stands for it.
    field = f"{flag.removeprefix('--').replace('-', '_')}: "
    said = said.removeprefix(field)
    raise EnrollmentRefused(f"{flag}: {said or words.format(name=name)}")
