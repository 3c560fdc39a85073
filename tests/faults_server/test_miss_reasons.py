"""Miss reasons say what happened within the window: an agent offline for its
whole window that polls just after it closed is `offline`, not `unknown`; a window during which
the control plane itself was down is `platform_unavailable`, never blamed on the agent."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest

from control_plane.liveness.marks import LIVENESS_GAP, liveness_gap, mark_alive
from control_plane.registry import Services
from control_plane.types import Pool
from ground.contract import CONFIG_PATH
from tests.control_plane.conftest import Agent, Api, Org
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, Fleet
from tests.worlds.clocks import ManualClock

WINDOW = timedelta(minutes=15)


@pytest.fixture
def fleet(pool: Pool, services: Services, clock: ManualClock) -> Iterator[Fleet]:
    made = Fleet(pool, services, clock)
    yield made
    made.close()


def _poll_at(api: Api, agent: Agent, clock: ManualClock, *minutes: float) -> None:
    """The agent's config polls at these minutes after the slot opened (negative: before)."""
    with api.client(agent.agent_key) as client:
        for minute in minutes:
            clock.set(NIGHT + timedelta(minutes=minute))
            assert client.get(CONFIG_PATH).status_code == 200


def _reason(fleet: Fleet) -> str:
    [reason] = fleet.missed().values()
    return reason


def test_offline_for_the_whole_window_and_polling_just_after_it_is_offline(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock
) -> None:
    _poll_at(api, agent, clock, -3, -2, -1)  # then the host is down for the window
    _poll_at(api, agent, clock, 16, 17)  # back before the worker's pass
    fleet.reconcile(AFTER_NIGHT)
    assert _reason(fleet) == "offline"


def test_polling_through_the_window_without_claiming_is_unknown(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock
) -> None:
    _poll_at(api, agent, clock, *range(-2, 18))
    fleet.reconcile(AFTER_NIGHT)
    assert _reason(fleet) == "unknown"


def test_seen_inside_the_window_then_away_then_back_is_unknown(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock
) -> None:
    _poll_at(api, agent, clock, 4, 5)  # seen in the window, then gone past the stretch gap
    _poll_at(api, agent, clock, 12 + 5, 18)
    fleet.reconcile(AFTER_NIGHT)
    assert _reason(fleet) == "unknown"


def _marks(pool: Pool, replica: str, *spans: tuple[datetime, datetime]) -> None:
    """A replica's liveness marks every 30 s through each span."""
    with pool.connection() as conn:
        started = None
        for start, end in spans:
            at = start
            while at <= end:
                started = mark_alive(conn, replica=replica, stretch_started=started, now=at)
                at += timedelta(seconds=30)


def test_a_window_during_our_outage_is_platform_unavailable(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock, pool: Pool
) -> None:
    _poll_at(api, agent, clock, -3, -2, -1)
    # Up until 02:01, SIGKILLed, back at 02:30.
    _marks(
        pool,
        "replica-a",
        (NIGHT - timedelta(hours=1), NIGHT + timedelta(minutes=1)),
        (NIGHT + timedelta(minutes=30), NIGHT + timedelta(minutes=31)),
    )
    fleet.reconcile(NIGHT + timedelta(minutes=31))
    assert _reason(fleet) == "platform_unavailable"


def test_another_replica_up_through_the_window_makes_it_the_agents_miss(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock, pool: Pool
) -> None:
    _poll_at(api, agent, clock, -3, -2, -1)
    outage = (NIGHT - timedelta(hours=1), NIGHT + timedelta(minutes=1))
    _marks(
        pool, "replica-a", outage, (NIGHT + timedelta(minutes=30), NIGHT + timedelta(minutes=31))
    )
    _marks(pool, "replica-b", (NIGHT - timedelta(minutes=10), NIGHT + timedelta(minutes=31)))
    fleet.reconcile(NIGHT + timedelta(minutes=31))
    assert _reason(fleet) == "offline"


def test_a_gap_shorter_than_the_liveness_gap_is_no_outage(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock, pool: Pool
) -> None:
    _poll_at(api, agent, clock, -1)
    pause = NIGHT + timedelta(minutes=5)
    _marks(
        pool,
        "replica-a",
        (NIGHT - timedelta(hours=1), pause),
        (pause + LIVENESS_GAP - timedelta(seconds=30), NIGHT + timedelta(minutes=31)),
    )
    fleet.reconcile(NIGHT + timedelta(minutes=31))
    assert _reason(fleet) == "offline"


def test_a_window_before_the_first_mark_ever_is_judged_as_before(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock, pool: Pool
) -> None:
    _poll_at(api, agent, clock, -1)
    _marks(pool, "replica-a", (NIGHT + timedelta(minutes=30), NIGHT + timedelta(minutes=31)))
    fleet.reconcile(NIGHT + timedelta(minutes=31))
    assert _reason(fleet) == "offline"


def test_a_refusal_during_the_window_still_names_the_reason(
    api: Api, fleet: Fleet, org: Org, agent: Agent, clock: ManualClock, pool: Pool
) -> None:
    fleet.sql("UPDATE platform_brake SET engaged = true, reason = 'incident 44'")
    clock.set(NIGHT + timedelta(minutes=1))
    with api.client(agent.agent_key) as client:
        assert (
            client.post("/v1/agent/claims", json={"slot_key": "2026-11-30T03:00"}).status_code
            == 503
        )
    fleet.services.refusals.flush()
    _marks(pool, "replica-a", (NIGHT - timedelta(hours=1), NIGHT + timedelta(minutes=2)))
    _marks(pool, "replica-a2", (NIGHT + timedelta(minutes=30), NIGHT + timedelta(minutes=31)))
    fleet.reconcile(NIGHT + timedelta(minutes=31))
    assert _reason(fleet) == "brake"


def test_the_database_refuses_a_miss_reason_it_does_not_know(fleet: Fleet, pool: Pool) -> None:
    import psycopg

    agent = fleet.agent(fleet.org(), "web-01")
    with pytest.raises(psycopg.errors.CheckViolation):
        fleet.sql(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, miss_reason,"
            " created_at) VALUES (%s, %s, 'schedule', '2026-11-30T03:00', %s, 'missed',"
            " 'platform_down', %s)",
            [agent.id, agent.org_id, NIGHT, NIGHT],
        )


@pytest.mark.parametrize(
    ("speed", "gap"),
    [
        pytest.param(1.0, LIVENESS_GAP, id="real_clock"),
        pytest.param(60.0, LIVENESS_GAP, id="speed_60_five_real_seconds"),
        pytest.param(600.0, timedelta(minutes=50), id="speed_600_a_slow_pass_is_no_outage"),
    ],
)
def test_the_liveness_gap_is_at_least_a_few_real_seconds(speed: float, gap: timedelta) -> None:
    assert liveness_gap(speed) == gap


def test_marks_of_a_fast_clock_stay_one_stretch_across_a_slow_pass(
    api: Api, fleet: Fleet, agent: Agent, clock: ManualClock, pool: Pool
) -> None:
    _poll_at(api, agent, clock, -1)
    gap = liveness_gap(600.0)
    with pool.connection() as conn:
        started = mark_alive(
            conn, replica="fast", stretch_started=None, now=NIGHT - timedelta(hours=1), gap=gap
        )
        # One pass took four real seconds: 40 product minutes at speed 600.
        for at in (NIGHT - timedelta(minutes=20), NIGHT + timedelta(minutes=20)):
            assert (
                mark_alive(conn, replica="fast", stretch_started=started, now=at, gap=gap)
                == started
            )
    fleet.reconcile(NIGHT + timedelta(minutes=21))
    assert _reason(fleet) == "offline"
