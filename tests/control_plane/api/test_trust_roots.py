"""Trust roots over HTTP: published by operators only when they chain, served to agents as
the exact bytes, named in the config answer."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from control_plane.types import Pool
from ground.contract import (
    CONFIG_PATH,
    TRUST_ROOT_VERSION_HEADER,
    TRUST_ROOTS_PATH,
    trust_root_path,
)
from tests.control_plane.conftest import Agent, Api, Org
from tests.control_plane.root_chain import RootChain

PUBLISH = "/v1/admin/trust-roots"


@pytest.fixture
def chain() -> RootChain:
    return RootChain()


def _publish(api: Api, key: str, body: bytes) -> httpx.Response:
    with api.client(key) as client:
        return client.post(PUBLISH, content=body, headers={"Content-Type": "application/json"})


def test_an_agent_fetches_the_exact_bytes_of_a_published_root(
    api: Api,
    operator_key: str,
    chain: RootChain,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        answer = client.get(trust_root_path(1))
    assert answer.status_code == 200
    assert answer.content == chain.v1
    assert answer.headers["content-type"] == "application/json"
    assert "immutable" in answer.headers["cache-control"]


def test_the_config_names_the_newest_published_root(
    api: Api,
    operator_key: str,
    chain: RootChain,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/agent/config").json()["trust_root_version"] is None
        assert _publish(api, operator_key, chain.v1).status_code == 201
        assert _publish(api, operator_key, chain.next(chain.v1)).status_code == 201
        assert client.get("/v1/agent/config").json()["trust_root_version"] == 2


@pytest.mark.parametrize(
    "version",
    [
        pytest.param("2", id="not_published_yet"),
        pytest.param("0", id="zero"),
        pytest.param("-1", id="negative"),
        pytest.param("99999999999", id="beyond_the_column"),
        pytest.param("9" * 400, id="four_hundred_digits"),
    ],
)
def test_an_absent_version_is_not_found(
    api: Api,
    operator_key: str,
    chain: RootChain,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    version: str,
) -> None:
    assert _publish(api, operator_key, chain.v1).status_code == 201
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        answer = client.get(f"{TRUST_ROOTS_PATH}/{version}")
    assert answer.status_code in (404, 422)
    assert (
        "cache-control" not in answer.headers or "immutable" not in answer.headers["cache-control"]
    )


@pytest.mark.parametrize(
    "version", [pytest.param("abc", id="letters"), pytest.param("1e3", id="exponent")]
)
def test_a_version_that_is_no_number_is_refused(
    api: Api, make_org: Callable[..., Org], make_agent: Callable[..., Agent], version: str
) -> None:
    agent = make_agent(make_org())
    with api.client(agent.agent_key) as client:
        assert client.get(f"{TRUST_ROOTS_PATH}/{version}").status_code == 422


def test_a_root_is_served_to_agents_only(
    api: Api, operator_key: str, chain: RootChain, make_org: Callable[..., Org]
) -> None:
    org = make_org()
    assert _publish(api, operator_key, chain.v1).status_code == 201
    with api.client() as client:
        assert client.get(trust_root_path(1)).status_code == 401
    with api.client(org.panel_key) as client:
        assert client.get(trust_root_path(1)).status_code == 403


def _held(pool: Pool, agent: Agent) -> int | None:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT trust_root_version FROM agents WHERE id = %s", [agent.agent_id]
        ).fetchone()
    assert row is not None
    held: int | None = row["trust_root_version"]
    return held


def _poll(api: Api, agent: Agent, held: str) -> None:
    with api.client(agent.agent_key) as client:
        answer = client.get(CONFIG_PATH, headers={TRUST_ROOT_VERSION_HEADER: held})
    assert answer.status_code == 200


def test_the_root_an_agent_reports_with_its_poll_is_recorded(
    api: Api, pool: Pool, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent(make_org())
    _poll(api, agent, "3")
    assert _held(pool, agent) == 3
    _poll(api, agent, "4")  # within the sightings' resolution: written because it changed
    assert _held(pool, agent) == 4


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("0", id="zero"),
        pytest.param("-1", id="negative"),
        pytest.param("abc", id="letters"),
        pytest.param("2.5", id="decimal"),
        pytest.param("07", id="leading_zero"),
        pytest.param("99999999999", id="beyond_the_column"),
        pytest.param("", id="empty"),
        pytest.param("5, 6", id="two_values"),
    ],
)
def test_a_report_that_is_no_version_is_ignored_never_refused(
    api: Api,
    pool: Pool,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    header: str,
) -> None:
    agent = make_agent(make_org())
    _poll(api, agent, "2")
    _poll(api, agent, header)
    assert _held(pool, agent) == 2
