"""What an answer to the enrollment exchange means, read purely (status and body in): the new
agent, or one line naming what to do — whatever the server sent."""

from __future__ import annotations

import uuid

import pytest

from agent_daemon.commands.enrollment_exchange import enrolled_agent
from agent_daemon.errors import BadServerAnswer, ControlPlaneUnreachable, EnrollmentRefused
from ground.contract import EnrolledAgent

AGENT = EnrolledAgent(
    agent_id=uuid.uuid4(), org_id=uuid.uuid4(), name="web-01", credential="nwa_new_agents_secret"
)


def refusal(code: str, message: str = "") -> bytes:
    return f'{{"detail": {{"code": "{code}", "message": "{message}"}}}}'.encode()


def test_a_created_agent_is_read() -> None:
    assert enrolled_agent(201, AGENT.model_dump_json().encode(), name="web-01") == AGENT


@pytest.mark.parametrize(
    ("status", "body", "error", "expected"),
    [
        pytest.param(201, AGENT.model_copy(update={"credential": "nwe_a_token"}).model_dump_json()
                     .encode(), BadServerAnswer, "credential: expected an agent credential",
                     id="created_without_an_agent_credential"),
        pytest.param(201, b"<html>hello</html>", BadServerAnswer, "the answer is not JSON",
                     id="created_but_not_json"),
        pytest.param(404, b"Not Found", BadServerAnswer, "does not offer enrollment tokens (404)",
                     id="older_control_plane"),
        pytest.param(502, b"<html>bad gateway</html>", ControlPlaneUnreachable, "answered 502",
                     id="proxy_error_page"),
        pytest.param(401, refusal("enrollment_token_used_up"), EnrollmentRefused,
                     "--enrollment-token: the enrollment token has no use left: ask",
                     id="used_up_without_words"),
        pytest.param(401, refusal("enrollment_token_expired", "expired at 01:00:\\nask again"),
                     EnrollmentRefused, "--enrollment-token: expired at 01:00: ask again",
                     id="server_words_on_one_line"),
        pytest.param(409, refusal("agent_exists"), EnrollmentRefused,
                     "--name: the organisation already has an agent named 'web-01'",
                     id="agent_exists"),
        pytest.param(403, refusal("agent_name_not_allowed", "name: found 'web-01' — no"),
                     EnrollmentRefused, "--name: found 'web-01' — no",
                     id="server_words_name_the_field_once"),
        pytest.param(422, refusal("invalid_request", "name: too long"), EnrollmentRefused,
                     "--name: the control plane refused 'web-01' (name: too long)",
                     id="malformed_name"),
        pytest.param(403, refusal("forbidden", "no"), EnrollmentRefused,
                     "POST /v1/agent/enroll: refused (403 forbidden) (no)", id="unknown_code"),
        pytest.param(418, b"teapot", BadServerAnswer, "expected 201 with the new agent, found 418",
                     id="not_the_contract"),
    ],
)  # fmt: skip
def test_every_other_answer_is_one_line(
    status: int, body: bytes, error: type[Exception], expected: str
) -> None:
    with pytest.raises(error) as raised:
        enrolled_agent(status, body, name="web-01")
    message = str(raised.value)
    assert expected in message
    assert "\n" not in message
    assert "nwe_a_token" not in message
