"""The service methods the panel reads through: sign-in sessions (accounts), the agents' overview
(one call for the whole list), grants per round (claims) and outcomes per slot (runs)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from uuid import UUID

from control_plane.accounts.credentials import Audience
from control_plane.accounts.sessions import ABSOLUTE_LIFETIME, IDLE_LIMIT
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Agent, Org
from tests.worlds.clocks import ManualClock

NOW = datetime(2026, 11, 30, 1, 0, tzinfo=UTC)


def _panel_principal(services: Services, org: Org) -> UUID:
    return services.accounts.authenticate(org.panel_key, Audience.PANEL).credential_id


def test_a_session_lives_until_idle_or_its_end(
    services: Services, make_org: Callable[[str], Org]
) -> None:
    credential = _panel_principal(services, make_org("Acme"))
    opened = services.sessions.open(credential, now=NOW)
    assert opened.expires_at == NOW + ABSOLUTE_LIFETIME
    found = services.sessions.find(opened.secret, now=NOW + IDLE_LIMIT / 2)
    assert found is not None
    assert (found.credential_id, found.audience) == (credential, Audience.PANEL)
    # The visit above moved the idle limit on; a longer silence ends the session.
    assert services.sessions.find(opened.secret, now=NOW + IDLE_LIMIT) is not None
    assert services.sessions.find(opened.secret, now=NOW + IDLE_LIMIT * 3) is None


def test_a_session_ends_with_its_key_and_when_signed_out(
    services: Services, pool: Pool, make_org: Callable[[str], Org]
) -> None:
    credential = _panel_principal(services, make_org("Acme"))
    revoked = services.sessions.open(credential, now=NOW)
    closed = services.sessions.open(credential, now=NOW)
    services.sessions.close(closed.secret)
    assert services.sessions.find(closed.secret, now=NOW) is None
    assert services.sessions.find(revoked.secret, now=NOW) is not None
    with pool.connection() as conn:
        conn.execute("UPDATE credentials SET revoked_at = %s WHERE id = %s", [NOW, credential])
    assert services.sessions.find(revoked.secret, now=NOW) is None
    assert services.sessions.find("not-a-session", now=NOW) is None
    assert services.sessions.find("x" * 1000, now=NOW) is None


def test_the_overview_gives_each_agent_its_next_slot_and_newest_run(
    services: Services,
    pool: Pool,
    clock: ManualClock,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> None:
    org = make_org("Acme")
    other = make_org("Other")
    busy = make_agent(org, "web-01")
    quiet = make_agent(org, "web-02")
    make_agent(other, "theirs")
    org_id, busy_id, quiet_id = UUID(org.org_id), UUID(busy.agent_id), UUID(quiet.agent_id)
    requester = _panel_principal(services, org)
    services.agents.set_schedule(org_id, quiet_id, enabled=False, times=[], now=clock.now())
    last_night = clock.now() - timedelta(days=1)
    with pool.connection() as conn:
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
            " created_at) VALUES (%s, %s, 'schedule', %s, %s, 'up_to_date', %s)",
            [busy_id, org_id, last_night.strftime("%Y-%m-%dT%H:%M"), last_night, last_night],
        )
    newest = services.runs.request_manual_update(org_id, busy_id, requester, now=clock.now())

    overview = services.agents.overview(org_id, now=clock.now())

    assert [row.name for row in overview.agents] == ["web-01", "web-02"]
    busy_row, quiet_row = overview.agents
    assert busy_row.last_run is not None
    assert busy_row.last_run.run_id == newest.run.run_id
    page = services.agents.agent_page(org_id, busy_id, now=clock.now())
    assert busy_row.next_slot == page.next_slot
    assert busy_row.next_slot is not None
    assert (quiet_row.last_run, quiet_row.next_slot) == (None, None)


def test_grants_per_round_are_the_rounds_in_the_window_beside_the_cap(
    services: Services, pool: Pool
) -> None:
    rounds = [NOW - timedelta(hours=25), NOW - timedelta(hours=2), NOW - timedelta(minutes=1)]
    with pool.connection() as conn:
        for number, start in enumerate(rounds, start=1):
            conn.execute(
                "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, %s)",
                [start, number * 10],
            )
        conn.execute(
            "INSERT INTO claim_rounds_global (round_start, granted) VALUES (%s, 0)",
            [NOW - timedelta(minutes=2)],
        )
    history = services.claims.grants_per_round(since=NOW - timedelta(hours=24), until=NOW)
    assert [(r.round_start, r.granted) for r in history.rounds] == [
        (rounds[1], 20),
        (rounds[2], 30),
    ]
    assert history.global_cap == services.settings.get().global_cap


def test_outcomes_per_slot_count_statuses_and_misses_by_reason(
    services: Services,
    pool: Pool,
    make_org: Callable[[str], Org],
    make_agent: Callable[[Org, str], Agent],
) -> None:
    org = make_org("Acme")
    agents = [make_agent(org, f"web-{n:02d}") for n in range(5)]
    night = NOW - timedelta(hours=2)
    earlier = NOW - timedelta(hours=30)
    rows = [
        (agents[0], night, "succeeded", None),
        (agents[1], night, "succeeded", None),
        (agents[2], night, "missed", "offline"),
        (agents[3], night, "missed", "throttled"),
        (agents[4], night, "missed", "offline"),
        (agents[0], earlier, "failed", None),
    ]
    with pool.connection() as conn:
        for agent, slot_at, status, reason in rows:
            conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status,"
                " miss_reason, created_at) VALUES (%s, %s, 'schedule', %s, %s, %s, %s, %s)",
                [
                    agent.agent_id,
                    org.org_id,
                    slot_at.strftime("%Y-%m-%dT%H:%M"),
                    slot_at,
                    status,
                    reason,
                    slot_at,
                ],
            )
    outcomes = services.runs.outcomes_per_slot(since=NOW - timedelta(hours=24), until=NOW)
    [slot] = outcomes.slots
    assert slot.slot_at == night
    assert slot.counts == {"succeeded": 2, "missed": 3}
    assert slot.missed_by_reason == {"offline": 2, "throttled": 1}
