"""The contract's version over real HTTP: every answer carries the control plane's, an agent that
sends none (the releases before the header) is served as before, and one that names a contract
older than the control plane serves is refused in words naming both versions."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import httpx
import psycopg
import pytest

from agent_daemon.connection.control_plane_client import ControlPlaneClient, NotModified
from agent_daemon.connection.http_client import build_http_client
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.errors import ControlPlaneError
from control_plane.api.agent_contract import OLDEST_AGENT_CONTRACT
from ground.clock import SystemClock
from ground.contract import (
    CLAIMS_PATH,
    CONFIG_PATH,
    CONTRACT_VERSION,
    CONTRACT_VERSION_HEADER,
    AgentConfig,
    AnswerCode,
)
from tests.conftest import RunningControlPlane


@pytest.fixture
def plane_and_agent(
    control_plane_server: Callable[..., RunningControlPlane],
) -> tuple[RunningControlPlane, str]:
    plane = control_plane_server()
    org = plane.create_org("Acme")
    return plane, plane.enroll_agent(org["org_id"], "web-01")["agent_key"]


def _get_config(plane: RunningControlPlane, agent_key: str, **headers: str) -> httpx.Response:
    with httpx.Client(base_url=plane.base_url, timeout=60) as client:
        return client.get(CONFIG_PATH, headers={"Authorization": f"Bearer {agent_key}", **headers})


def test_every_answer_carries_the_contract_version(
    plane_and_agent: tuple[RunningControlPlane, str],
) -> None:
    plane, agent_key = plane_and_agent
    with httpx.Client(base_url=plane.base_url, timeout=60) as client:
        answers = [
            client.get("/healthz"),
            client.get(CONFIG_PATH),  # no credential: 401
            client.get(CONFIG_PATH, headers={"Authorization": f"Bearer {agent_key}"}),
            client.post(
                CLAIMS_PATH,
                headers={"Authorization": f"Bearer {agent_key}"},
                json={"slot_key": "not a slot"},
            ),
        ]
    assert [answer.status_code for answer in answers] == [200, 401, 200, 422]
    assert {answer.headers.get(CONTRACT_VERSION_HEADER) for answer in answers} == {
        str(CONTRACT_VERSION)
    }


def test_an_agent_without_the_header_is_served_and_told_the_version_in_its_config(
    plane_and_agent: tuple[RunningControlPlane, str],
) -> None:
    plane, agent_key = plane_and_agent
    answer = _get_config(plane, agent_key)
    assert answer.status_code == 200, answer.text
    assert AgentConfig.model_validate(answer.json()).contract_version == CONTRACT_VERSION
    # The version is not part of the ETag: replicas of two releases answer the same one.
    again = _get_config(plane, agent_key, **{"If-None-Match": answer.headers["ETag"]})
    assert again.status_code == 304


@pytest.mark.parametrize(
    "sent",
    [
        pytest.param(str(CONTRACT_VERSION), id="this_contract"),
        pytest.param(str(OLDEST_AGENT_CONTRACT), id="oldest_served"),
        pytest.param(str(CONTRACT_VERSION + 1), id="newer_agent"),
    ],
)
def test_an_agent_of_a_served_contract_is_served(
    plane_and_agent: tuple[RunningControlPlane, str], sent: str
) -> None:
    plane, agent_key = plane_and_agent
    answer = _get_config(plane, agent_key, **{CONTRACT_VERSION_HEADER: sent})
    assert answer.status_code == 200, answer.text


def test_an_agent_older_than_the_oldest_served_contract_is_refused_naming_the_versions(
    plane_and_agent: tuple[RunningControlPlane, str],
) -> None:
    plane, agent_key = plane_and_agent
    forged = str(OLDEST_AGENT_CONTRACT - 1)
    headers = {"Authorization": f"Bearer {agent_key}", CONTRACT_VERSION_HEADER: forged}
    with httpx.Client(base_url=plane.base_url, timeout=60) as client:
        answers = [
            client.get(CONFIG_PATH, headers=headers),
            client.post(CLAIMS_PATH, headers=headers, json={"slot_key": "2026-11-30T03:00"}),
        ]
    for answer in answers:
        assert answer.status_code == 400, answer.text
        assert answer.headers[CONTRACT_VERSION_HEADER] == str(CONTRACT_VERSION)
        detail = answer.json()["detail"]
        assert detail["code"] == AnswerCode.CONTRACT_TOO_OLD.value
        assert detail["message"] == (
            f"this agent speaks contract version {forged} ({CONTRACT_VERSION_HEADER}); this "
            f"control plane serves agents of contract versions {OLDEST_AGENT_CONTRACT} to "
            f"{CONTRACT_VERSION}: upgrade the agent on this host"
        )
    # The refused claim never reached the routes: nothing was recorded of it.
    with psycopg.connect(plane.database_url) as conn:
        assert conn.execute("SELECT count(*) FROM runs").fetchone() == (0,)


@pytest.mark.parametrize("sent", ["two", "-1", "1.5", "9" * 40, ""])
def test_a_header_that_is_no_version_is_refused_naming_it(
    plane_and_agent: tuple[RunningControlPlane, str], sent: str
) -> None:
    plane, agent_key = plane_and_agent
    answer = _get_config(plane, agent_key, **{CONTRACT_VERSION_HEADER: sent})
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert detail["code"] == AnswerCode.INVALID_REQUEST.value
    assert detail["errors"][0]["field"] == CONTRACT_VERSION_HEADER
    assert detail["message"].startswith(f"{CONTRACT_VERSION_HEADER}: ")
    assert "expected the agent's contract version, a whole number" in detail["message"]


def test_other_paths_ignore_the_header(
    plane_and_agent: tuple[RunningControlPlane, str],
) -> None:
    plane, _ = plane_and_agent
    with httpx.Client(base_url=plane.base_url, timeout=60) as client:
        answer = client.get("/healthz", headers={CONTRACT_VERSION_HEADER: "0"})
    assert answer.status_code == 200


class _Recording(httpx.HTTPTransport):
    """Real HTTP; keeps each request as it went out."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        return super().handle_request(request)


@contextlib.contextmanager
def _agent_client(
    plane: RunningControlPlane,
    agent_key: str,
    transport: httpx.BaseTransport,
    *,
    contract: str | None = None,
) -> Iterator[ControlPlaneClient]:
    """The agent's own client; `contract` replaces the version it sends."""
    with build_http_client(
        base_url=plane.base_url, credential=agent_key, timeout_seconds=60, transport=transport
    ) as http:
        if contract is not None:
            http.headers[CONTRACT_VERSION_HEADER] = contract
        yield ControlPlaneClient(http=http, server_clock=ServerClock(SystemClock()))


def test_the_agent_sends_its_contract_version_and_reads_the_control_planes(
    plane_and_agent: tuple[RunningControlPlane, str],
) -> None:
    plane, agent_key = plane_and_agent
    recording = _Recording()
    with _agent_client(plane, agent_key, recording) as client:
        config = client.fetch_config(etag=None)
    assert [r.headers.get(CONTRACT_VERSION_HEADER) for r in recording.sent] == [
        str(CONTRACT_VERSION)
    ]
    assert not isinstance(config, NotModified)
    assert config.config.contract_version == CONTRACT_VERSION


def test_an_agent_refused_as_too_old_shows_the_control_planes_words(
    plane_and_agent: tuple[RunningControlPlane, str],
) -> None:
    plane, agent_key = plane_and_agent
    # An agent of a contract older than any served, as a future control plane meets this one.
    forged = str(OLDEST_AGENT_CONTRACT - 1)
    with (
        _agent_client(plane, agent_key, httpx.HTTPTransport(), contract=forged) as client,
        pytest.raises(ControlPlaneError) as caught,
    ):
        client.fetch_config(etag=None)
    assert "upgrade the agent on this host" in str(caught.value)
