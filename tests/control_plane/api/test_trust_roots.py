"""Trust roots over HTTP: published by operators only when they chain, served to agents as
the exact bytes, named in the config answer."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from ground.contract import TRUST_ROOTS_PATH, trust_root_path
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
