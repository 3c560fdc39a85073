"""The swap's confirmation as the agent reads it: only a 200 `SwapPermit` for the run
allows the switch; every other answer is a refusal with its reason, or no answer at all."""

from __future__ import annotations

import io
import json
import uuid
from datetime import UTC, datetime

import httpx
import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.connection.wire import swap_refusal_reason
from agent_daemon.disk.daemon_state import ClaimInProgress
from agent_daemon.errors import BadServerAnswer, ControlPlaneUnreachable, CredentialRefused
from agent_daemon.host.event_log import EventLog
from agent_daemon.minute.swap_confirmation import SwapConfirmation
from agent_daemon.updater.swap_gate import SwapAllowed, SwapRefused, SwapUnanswered
from ground.contract import (
    SERVER_TIME_HEADER,
    ErrorDetail,
    OutcomeReason,
    SwapPermit,
    confirm_path,
    format_instant,
)
from tests.worlds.clocks import ManualClock

NOW = datetime(2026, 11, 30, 2, 5, tzinfo=UTC)
RUN_ID = str(uuid.UUID("5f0e0000-0000-4000-8000-000000000001"))


def client_answering(status: int, body: object) -> tuple[ControlPlaneClient, list[str]]:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.Response(
            status, content=content, headers={SERVER_TIME_HEADER: format_instant(NOW)}
        )

    http = build_http_client(
        base_url="http://control.test",
        credential="nwa_test_credential",
        timeout_seconds=5,
        transport=httpx.MockTransport(answer),
    )
    return ControlPlaneClient(http=http, server_clock=ServerClock(ManualClock(NOW))), seen


def refusal(code: str) -> dict[str, object]:
    return {"detail": {"code": code, "message": f"refused: {code}"}}


def test_a_200_permit_is_read_and_the_path_is_the_contracts() -> None:
    permit = {
        "run_id": RUN_ID,
        "token": {"id": str(uuid.uuid4()), "expires_at": "2026-11-30T03:00:00Z"},
        "window_closes_at": "2026-11-30T02:15:00Z",
    }
    client, seen = client_answering(200, permit)
    answer = client.confirm_swap(RUN_ID)
    assert isinstance(answer, SwapPermit)
    assert str(answer.run_id) == RUN_ID
    assert seen == [f"POST {confirm_path(RUN_ID)}"]


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        pytest.param("token_revoked", OutcomeReason.TOKEN_REVOKED, id="brake_revoked"),
        pytest.param("token_expired", OutcomeReason.TOKEN_EXPIRED, id="expired"),
    ],
)
def test_a_coded_403_is_the_runs_refusal_not_the_credentials(
    code: str, reason: OutcomeReason
) -> None:
    client, _ = client_answering(403, refusal(code))
    answer = client.confirm_swap(RUN_ID)
    assert isinstance(answer, ErrorDetail)
    assert answer.code == code
    assert swap_refusal_reason(answer) == reason


def test_a_plain_403_is_still_the_credential_refused() -> None:
    client, _ = client_answering(403, {"detail": "wrong audience"})
    with pytest.raises(CredentialRefused):
        client.confirm_swap(RUN_ID)


def test_database_unavailable_is_no_answer_and_names_the_platform() -> None:
    client, _ = client_answering(503, refusal("database_unavailable"))
    with pytest.raises(ControlPlaneUnreachable) as raised:
        client.confirm_swap(RUN_ID)
    assert raised.value.status == 503


def test_a_proxys_502_page_is_no_answer_but_not_the_platforms_word() -> None:
    client, _ = client_answering(502, b"<html>bad gateway</html>")
    with pytest.raises(ControlPlaneUnreachable) as raised:
        client.confirm_swap(RUN_ID)
    assert raised.value.status is None


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(404, {"detail": "Not Found"}, id="a_control_plane_without_the_route"),
        pytest.param(200, {"run_id": RUN_ID}, id="a_permit_without_its_token"),
        pytest.param(200, b"yes", id="not_json"),
        pytest.param(204, b"", id="no_content"),
    ],
)
def test_anything_but_a_permit_or_a_coded_refusal_never_allows_the_switch(
    status: int, body: object
) -> None:
    client, _ = client_answering(status, body)
    with pytest.raises(BadServerAnswer):
        client.confirm_swap(RUN_ID)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        pytest.param("window_closed", OutcomeReason.WINDOW_CLOSED, id="window_closed"),
        pytest.param("run_finished", OutcomeReason.TOKEN_REVOKED, id="another_code"),
    ],
)
def test_other_refusals_end_the_run_without_switching(code: str, reason: OutcomeReason) -> None:
    client, _ = client_answering(409, refusal(code))
    answer = client.confirm_swap(RUN_ID)
    assert isinstance(answer, ErrorDetail)
    assert swap_refusal_reason(answer) == reason


def confirmation(status: int, body: object, **claim_fields: object) -> SwapConfirmation:
    client, _ = client_answering(status, body)
    claim = ClaimInProgress(
        run_id=RUN_ID,
        trigger="schedule",
        slot_key="2026-11-30T03:00",
        release_version="1.5.0",
        manifest_b64="",
        signature_b64="",
        artifact_url="http://control.test/a",
        claimed_at=NOW,
        **claim_fields,  # type: ignore[arg-type]
    )
    return SwapConfirmation(
        control=client,
        clock=ServerClock(ManualClock(NOW)),
        log=EventLog(now=lambda: NOW, stream=io.StringIO()),
        claim=claim,
    )


def test_a_permit_for_another_run_permits_nothing() -> None:
    other = {
        "run_id": str(uuid.uuid4()),
        "token": {"id": str(uuid.uuid4()), "expires_at": "2026-11-30T03:00:00Z"},
    }
    verdict = confirmation(200, other)()
    assert isinstance(verdict, SwapUnanswered)


def test_the_permit_is_the_switch_at_the_control_planes_time() -> None:
    permit = {
        "run_id": RUN_ID,
        "token": {"id": str(uuid.uuid4()), "expires_at": "2026-11-30T03:00:00Z"},
    }
    assert confirmation(200, permit)() == SwapAllowed(at=NOW)


def test_a_closed_window_at_the_swap_ends_the_run_with_its_last_failure() -> None:
    verdict = confirmation(
        409, refusal("window_closed"), last_reason=OutcomeReason.DOWNLOAD_FAILED
    )()
    assert isinstance(verdict, SwapRefused)
    assert verdict.reason == OutcomeReason.DOWNLOAD_FAILED


def test_a_closed_window_at_the_swap_with_nothing_failed_before_is_window_closed() -> None:
    verdict = confirmation(409, refusal("window_closed"))()
    assert isinstance(verdict, SwapRefused)
    assert verdict.reason == OutcomeReason.WINDOW_CLOSED


def test_a_revoked_token_at_the_swap_is_refused_with_its_code() -> None:
    verdict = confirmation(403, refusal("token_revoked"))()
    assert isinstance(verdict, SwapRefused)
    assert verdict.reason == OutcomeReason.TOKEN_REVOKED
