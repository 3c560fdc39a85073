"""Missed slots: every enabled agent's slot whose window closed without a run row gets
one, status `missed`, with the reason as a fact — offline, throttled, brake or unknown."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.events.trail import Actor
from control_plane.registry import Services
from control_plane.types import Pool
from tests.control_plane.conftest import Api, sign_release
from tests.control_plane.reconcile_fleet import AFTER_NIGHT, NIGHT, NIGHT_KEY, Fleet

OPERATOR = Actor(kind="operator", name="tests")


def _claim(api: Api, agent_key: str, slot_key: str = NIGHT_KEY) -> int:
    with api.client(agent_key) as client:
        return client.post("/v1/agent/claims", json={"slot_key": slot_key}).status_code


def test_agent_never_seen_misses_as_offline(fleet: Fleet) -> None:
    fleet.agent(fleet.org(), "web-01")
    report = fleet.reconcile(AFTER_NIGHT)
    assert report.missed == 1
    assert fleet.missed() == {"web-01": "offline"}


def test_agent_last_seen_before_the_slot_opened_misses_as_offline(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    fleet.seen(agent, NIGHT - timedelta(minutes=1))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "offline"}


def test_agent_seen_in_the_window_without_a_refusal_misses_as_unknown(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    fleet.seen(agent, NIGHT + timedelta(minutes=3))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


def test_agent_refused_by_a_full_cap_misses_as_throttled(
    api: Api, fleet: Fleet, services: Services, make_org, make_agent
) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    fleet.rounds_full(NIGHT, 15, org_id=org.org_id)
    fleet.clock.set(NIGHT + timedelta(minutes=2))
    assert _claim(api, agent.agent_key) == 429
    fleet.clock.set(NIGHT + timedelta(minutes=3))
    assert _claim(api, agent.agent_key) == 429
    assert services.refusals.flush() == 1  # two refusals, one fact
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "throttled"}


def test_agent_refused_by_the_brake_misses_as_brake(
    api: Api, fleet: Fleet, services: Services, make_org, make_agent
) -> None:
    agent = make_agent(make_org("Acme"), "web-01")
    fleet.sql("UPDATE platform_brake SET engaged = true, reason = 'incident 42'")
    fleet.clock.set(NIGHT + timedelta(minutes=2))
    assert _claim(api, agent.agent_key) == 503
    services.refusals.flush()
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "brake"}


def test_the_refusal_that_came_last_names_the_reason(
    api: Api, fleet: Fleet, services: Services, make_org, make_agent
) -> None:
    agent = make_agent(make_org("Acme"), "web-01")
    fleet.sql("UPDATE platform_brake SET engaged = true, reason = 'incident 43'")
    fleet.clock.set(NIGHT + timedelta(minutes=1))
    assert _claim(api, agent.agent_key) == 503
    fleet.sql("UPDATE platform_brake SET engaged = false")
    fleet.rounds_full(NIGHT, 15)
    fleet.clock.set(NIGHT + timedelta(minutes=6))
    assert _claim(api, agent.agent_key) == 429
    services.refusals.flush()
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "throttled"}


# The window's last minute, where no token is granted: a download started then could not finish
# before the switch is refused.
IN_THE_GRANT_MARGIN = NIGHT + timedelta(minutes=14, seconds=20)


def _claim_answer(api: Api, agent_key: str) -> tuple[int, str]:
    with api.client(agent_key) as client:
        answer = client.post("/v1/agent/claims", json={"slot_key": NIGHT_KEY})
    return answer.status_code, answer.json()["detail"]["code"]


def test_refused_by_the_caps_then_by_the_grant_margin_misses_as_throttled(
    api: Api, fleet: Fleet, services: Services, make_org, make_agent
) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    fleet.rounds_full(NIGHT, 15, org_id=org.org_id)
    for minute in (1, 7, 13):
        fleet.clock.set(NIGHT + timedelta(minutes=minute, seconds=20))
        assert _claim_answer(api, agent.agent_key) == (429, "org_cap")
    fleet.clock.set(IN_THE_GRANT_MARGIN)
    assert _claim_answer(api, agent.agent_key) == (409, "window_closed")
    services.refusals.flush()
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "throttled"}


def test_first_heard_of_in_the_grant_margin_by_its_poll_is_not_offline(
    api: Api, fleet: Fleet, services: Services, make_org, make_agent
) -> None:
    agent = make_agent(make_org("Acme"), "web-01")
    fleet.clock.set(IN_THE_GRANT_MARGIN)
    with api.client(agent.agent_key) as client:
        assert client.get("/v1/agent/config").status_code == 200
    assert _claim_answer(api, agent.agent_key) == (409, "window_closed")
    services.refusals.flush()
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


def test_first_heard_of_in_the_grant_margin_by_its_claim_is_not_offline(
    api: Api, fleet: Fleet, services: Services, pool: Pool, make_org, make_agent
) -> None:
    # Its poll was lost (or answered from its cache): the claim is the control plane hearing
    # from it, too late in the window for a token.
    agent = make_agent(make_org("Acme"), "web-01")
    fleet.clock.set(IN_THE_GRANT_MARGIN)
    assert _claim_answer(api, agent.agent_key) == (409, "window_closed")
    services.refusals.flush()
    with pool.connection() as conn:
        services.seen.write(conn)
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


@pytest.mark.parametrize("status", ["up_to_date", "succeeded", "failed", "rolled_back", "claimed"])
def test_a_consumed_slot_is_not_missed(fleet: Fleet, status: str) -> None:
    fleet.run(fleet.agent(fleet.org(), "web-01"), status)
    assert fleet.reconcile(AFTER_NIGHT).missed == 0
    assert fleet.missed() == {}


def test_consuming_a_later_open_slot_supersedes_the_earlier_one(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01", times=["03:00", "03:05"])
    fleet.run(agent, "succeeded", slot_key="2026-11-30T03:05", slot_at=NIGHT + timedelta(minutes=5))
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=5))
    assert fleet.missed() == {}


def test_a_disabled_agent_misses_nothing(fleet: Fleet) -> None:
    fleet.disable(fleet.agent(fleet.org(), "web-01"))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {}


def test_a_slot_under_way_at_enrollment_is_the_agents_and_missed_when_not_taken(
    fleet: Fleet,
) -> None:
    """The claim can take a slot whose window is open at enrollment, so the agent is held to it:
    one rule (`claims.slots.agents_slot`) for the claim and the missed pass."""
    fleet.clock.set(NIGHT + timedelta(minutes=1))  # enrolled inside the window, after it opened
    fleet.agent(fleet.org(), "web-01")
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "offline"}


def test_a_slot_whose_window_closed_before_enrollment_is_not_missed(fleet: Fleet) -> None:
    fleet.clock.set(NIGHT + timedelta(minutes=15))  # the window closes at this very instant
    fleet.agent(fleet.org(), "web-01")
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {}
    assert fleet.one("SELECT count(*) AS n FROM runs")["n"] == 0


def test_a_window_still_open_is_not_missed_yet(fleet: Fleet) -> None:
    fleet.agent(fleet.org(), "web-01")
    assert fleet.reconcile(NIGHT + timedelta(minutes=14)).missed == 0
    assert fleet.reconcile(NIGHT + timedelta(minutes=15, seconds=30)).missed == 0  # settling
    assert fleet.reconcile(NIGHT + timedelta(minutes=16)).missed == 1


def test_passes_are_idempotent(fleet: Fleet) -> None:
    fleet.agent(fleet.org(), "web-01")
    fleet.reconcile(AFTER_NIGHT)
    fleet.sql("UPDATE reconcile_progress SET reconciled_until = NULL")  # as if it never ran
    fleet.reconcile(AFTER_NIGHT)
    fleet.reconcile(AFTER_NIGHT + timedelta(minutes=1))
    count = fleet.one("SELECT count(*) AS n FROM runs WHERE status = 'missed'")
    events = fleet.one("SELECT count(*) AS n FROM events WHERE kind = 'update.missed'")
    assert (count["n"], events["n"]) == (1, 1)


def test_the_worker_catches_up_after_downtime(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    fleet.reconcile(NIGHT - timedelta(hours=1))
    fleet.reconcile(AFTER_NIGHT + timedelta(days=3))  # down for three nights
    keys = [
        row["slot_key"]
        for row in fleet.rows(
            "SELECT slot_key FROM runs WHERE agent_id = %s AND status = 'missed' ORDER BY slot_at",
            [agent.id],
        )
    ]
    assert keys == [
        "2026-11-30T03:00",
        "2026-12-01T03:00",
        "2026-12-02T03:00",
        "2026-12-03T03:00",
    ]


def test_a_miss_is_on_the_timeline_as_the_schedules_own_event(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    fleet.reconcile(AFTER_NIGHT)
    event = fleet.one(
        "SELECT kind, actor_kind, data FROM events WHERE agent_id = %s AND kind LIKE 'update.%%'",
        [agent.id],
    )
    assert event == {
        "kind": "update.missed",
        "actor_kind": "schedule",
        "data": {"slot_key": NIGHT_KEY, "reason": "offline"},
    }


def test_the_agent_page_shows_the_miss_and_its_reason(
    api: Api, fleet: Fleet, make_org, make_agent
) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    fleet.reconcile(AFTER_NIGHT)
    with api.client(org.panel_key) as client:
        page = client.get(f"/v1/agents/{agent.agent_id}").json()
    [run] = page["latest_runs"]
    assert (run["slot_key"], run["status"], run["miss_reason"]) == (NIGHT_KEY, "missed", "offline")


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        pytest.param("missed", None, id="missed_without_reason"),
        pytest.param("succeeded", "offline", id="reason_without_miss"),
        pytest.param("missed", "bored", id="unknown_reason"),
    ],
)
def test_the_database_refuses_a_miss_that_does_not_say_why(
    fleet: Fleet, status: str, reason: str | None
) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    with pytest.raises(psycopg.errors.CheckViolation):
        fleet.sql(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, created_at, status,"
            " miss_reason) VALUES (%s, %s, 'schedule', %s, %s, now(), %s, %s)",
            [agent.id, agent.org_id, NIGHT_KEY, NIGHT, status, reason],
        )


def test_the_database_refuses_a_missed_manual_run(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    with pytest.raises(psycopg.errors.CheckViolation):
        fleet.sql(
            "INSERT INTO runs (agent_id, org_id, trigger, status, miss_reason, created_at)"
            " VALUES (%s, %s, 'manual', 'missed', 'offline', now())",
            [agent.id, agent.org_id],
        )


def test_seen_while_the_brake_was_on_misses_as_brake_though_it_never_asked(
    fleet: Fleet, services: Services
) -> None:
    """A braked agent reads the brake in its config and does not ask for its slot: no refusal is
    on record, yet the brake is what kept it out (not a miss nobody can explain)."""
    org = fleet.org()
    braked = fleet.agent(org, "web-01")
    fleet.agent(org, "web-02")  # never seen
    services.brake.set(
        engaged=True,
        reason="incident 44",
        revoke_outstanding=True,
        actor=OPERATOR,
        now=NIGHT - timedelta(hours=1),
    )
    fleet.seen(braked, NIGHT + timedelta(minutes=3))
    fleet.reconcile(AFTER_NIGHT)
    # An agent not seen at all is offline, brake or not: it would have missed either way.
    assert fleet.missed() == {"web-01": "brake", "web-02": "offline"}


def test_a_brake_released_before_the_window_leaves_the_miss_unexplained(
    fleet: Fleet, services: Services
) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    for engaged, at in ((True, NIGHT - timedelta(hours=2)), (False, NIGHT - timedelta(hours=1))):
        services.brake.set(
            engaged=engaged, reason="incident 45", revoke_outstanding=True, actor=OPERATOR, now=at
        )
    fleet.seen(agent, NIGHT + timedelta(minutes=3))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


def test_a_brake_engaged_in_the_window_explains_the_miss(fleet: Fleet, services: Services) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    services.brake.set(
        engaged=True,
        reason="incident 46",
        revoke_outstanding=True,
        actor=OPERATOR,
        now=NIGHT + timedelta(minutes=10),
    )
    fleet.seen(agent, NIGHT + timedelta(minutes=3))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "brake"}


def test_the_brake_of_one_release_is_not_the_platforms(fleet: Fleet) -> None:
    agent = fleet.agent(fleet.org(), "web-01")
    fleet.sql(
        "INSERT INTO events (kind, actor_kind, at, data) VALUES ('brake.engaged', 'operator', %s,"
        ' \'{"scope": "release"}\')',
        [NIGHT - timedelta(hours=1)],
    )
    fleet.seen(agent, NIGHT + timedelta(minutes=3))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "unknown"}


def test_a_brake_whose_engaging_event_was_removed_still_counts(fleet: Fleet) -> None:
    # After the retention walk the brake's own row still says it is on, and since when.
    agent = fleet.agent(fleet.org(), "web-01")
    fleet.sql(
        "UPDATE platform_brake SET engaged = true, reason = 'old', changed_at = %s",
        [NIGHT - timedelta(days=400)],
    )
    fleet.seen(agent, NIGHT + timedelta(minutes=3))
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-01": "brake"}


def test_a_releases_brake_skips_the_slot_of_the_agents_offered_it_and_explains_no_silence(
    api: Api,
    fleet: Fleet,
    services: Services,
    release_key: Ed25519PrivateKey,
    make_org,
    make_agent,
) -> None:
    """One release's brake is not read from the config: the agent offered it asks, is refused
    `release_halted`, and its slot is consumed as `skipped` with that reason — no miss, and no
    refusal fact that could read `throttled`. The agents not offered the braked release keep
    their reasons, and an agent offered it that was seen but never asked stays `unknown`: it
    would have asked and been skipped, so the release's brake is not what kept it out."""
    for channel, version in (("stable", "1.5.0"), ("beta", "2.0.0")):
        release = sign_release(release_key, version=version, channel=channel)
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=fleet.clock.now()
        )
    [braked_id] = [
        entry.id
        for track in services.releases.list().tracks
        for entry in track.releases
        if entry.version == "1.5.0"
    ]
    services.brake.set_release(
        braked_id,
        engaged=True,
        reason="fills the disk",
        actor=OPERATOR,
        now=NIGHT - timedelta(hours=1),
    )
    org = make_org("Acme")
    asking, other_channel, silent = (
        make_agent(org, name) for name in ("web-01", "web-02", "web-03")
    )
    make_agent(org, "web-04")  # never seen
    fleet.clock.set(NIGHT + timedelta(minutes=2))
    with api.client(asking.agent_key) as client:
        answer = client.post(
            "/v1/agent/claims", json={"slot_key": NIGHT_KEY, "from_version": "1.4.1"}
        )
    assert (answer.status_code, answer.json()["detail"]["code"]) == (409, "release_halted")
    for agent, channel in ((other_channel, "beta"), (silent, "stable")):
        with api.client(agent.agent_key) as client:
            polled = client.get(
                "/v1/agent/config", params={"channel": channel, "platform": "linux-x86_64"}
            )
        assert polled.status_code == 200, polled.text
    services.refusals.flush()
    fleet.reconcile(AFTER_NIGHT)
    assert fleet.missed() == {"web-02": "unknown", "web-03": "unknown", "web-04": "offline"}
    skipped = fleet.rows(
        "SELECT a.name, r.status, r.skip_reason FROM runs r JOIN agents a ON a.id = r.agent_id"
        " WHERE r.status <> 'missed'"
    )
    assert skipped == [{"name": "web-01", "status": "skipped", "skip_reason": "release_halted"}]
    assert fleet.rows("SELECT reason FROM claim_refusals") == []
