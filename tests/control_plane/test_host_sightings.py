"""A host answering for an agent is noted by one statement (`control_plane.host_sightings`),
whichever of the three places saw it: the credential check, the config poll read from the
database, the polls answered from memory. Through each, a host keeps its first sighting and its
last only moves forward: a sighting at an earlier time, written after a later one, changes
nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from uuid import UUID

import pytest

from control_plane.accounts.credentials import Audience
from control_plane.agent_config.services import seen_recorder
from control_plane.poll_word import PollWord
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import DEFAULT_TRACK
from tests.conftest import REPO_ROOT
from tests.control_plane.conftest import Agent, Org
from tests.worlds.clocks import ManualClock

HOST = "host-aaaaaaaa"
Writer = Callable[[Services, Pool, Agent, datetime], None]


def _credential_checked(services: Services, pool: Pool, agent: Agent, at: datetime) -> None:
    services.accounts.authenticate(agent.agent_key, Audience.AGENT, host_id=HOST, now=at)


def _config_polled(services: Services, pool: Pool, agent: Agent, at: datetime) -> None:
    services.agent_config.config(UUID(agent.agent_id), DEFAULT_TRACK, at, PollWord(host_id=HOST))


def _seen_from_memory(services: Services, pool: Pool, agent: Agent, at: datetime) -> None:
    recorder = seen_recorder()
    recorder.saw(UUID(agent.agent_id), at, PollWord(host_id=HOST))
    with pool.connection() as conn:
        recorder.write(conn)


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(_credential_checked, id="credential_checked"),
        pytest.param(_config_polled, id="config_polled"),
        pytest.param(_seen_from_memory, id="seen_from_memory"),
    ],
)
def test_a_hosts_last_sighting_only_moves_forward(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
    write: Writer,
) -> None:
    agent = make_agent(make_org("Acme"), "web-01")
    first = clock.now()
    later = first + timedelta(hours=3)
    for at in (first, later, first + timedelta(hours=2)):
        write(services, pool, agent, at)
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT host_id, first_seen_at, last_seen_at FROM agent_hosts WHERE agent_id = %s",
            [agent.agent_id],
        ).fetchall()
    assert rows == [{"host_id": HOST, "first_seen_at": first, "last_seen_at": later}]


def test_the_statement_is_written_once() -> None:
    """Every writer of `agent_hosts` hands its sightings to `stamp_hosts`."""
    writers = sorted(
        str(path.relative_to(REPO_ROOT))
        for path in (REPO_ROOT / "control_plane").rglob("*.py")
        if "migrations" not in path.parts and "INSERT INTO agent_hosts" in path.read_text()
    )
    assert writers == ["control_plane/host_sightings.py"]
