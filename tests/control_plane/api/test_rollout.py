"""Releases for a real fleet, over real HTTP against a real PostgreSQL:
the canary stage and its promotion after the soak, the halt on errors with its evidence and one
operator notice, holds, pins, the brake per release and forced manual updates, `/metrics`.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
The next night's is 2026-12-01T02:00Z.
"""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import UUID, uuid5

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.rollout.offer import in_canary_share
from tests.control_plane.api.conftest import AT_0301, NEXT_SLOT, Rollout, TwoReleases
from tests.control_plane.conftest import sign_release


def test_the_first_release_of_a_pair_is_for_everyone_and_the_next_starts_as_canary(
    rollout: Rollout, release_key: Ed25519PrivateKey
) -> None:
    stages = []
    for version, manifest_version in (("1.5.0", 42), ("1.6.0", 43)):
        release = sign_release(release_key, version=version, manifest_version=manifest_version)
        stages.append(
            rollout.services.releases.publish(
                release.manifest, release.signature, release.artifact, now=rollout.clock.now()
            ).stage
        )
    assert stages == ["everyone", "canary"]
    overview = rollout.services.rollout.overview(AT_0301)
    assert [(pair.version, pair.stage) for pair in overview.pairs] == [("1.6.0", "canary")]


def test_canaries_get_the_canary_release_and_everyone_else_the_previous(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org = rollout.make_org()
    canary, other = rollout.make_agent(org, "canary-01"), rollout.make_agent(org, "web-01")
    marked = rollout.mark_canary(canary)
    assert marked.json() == {"agent_id": canary.agent_id, "canary": True}
    rollout.clock.set(AT_0301)

    assert rollout.config(canary)["release"]["version"] == "1.6.0"
    assert rollout.config(other)["release"]["version"] == "1.5.0"
    assert rollout.claim(canary).json()["release"]["version"] == "1.6.0"
    assert rollout.claim(other).json()["release"]["version"] == "1.5.0"

    with rollout.api.client(org.panel_key) as panel:
        shown = panel.get(f"/v1/agents/{other.agent_id}/release").json()
    assert shown["track"] == {"channel": "stable", "platform": "linux-x86_64"}
    assert shown["offered"]["version"] == "1.5.0"
    assert shown["basis"] == "previous"
    assert shown["canary"] is False
    with rollout.api.client(org.panel_key) as panel:
        listed = panel.get("/v1/agent-releases").json()["agents"]
    assert [(a["agent_id"], a["offered"]["version"], a["basis"]) for a in listed] == [
        (canary.agent_id, "1.6.0", "canary"),
        (other.agent_id, "1.5.0", "previous"),
    ]
    same = rollout.operator("GET", f"/v1/admin/orgs/{org.org_id}/agent-releases").json()["agents"]
    assert same == listed


# Fixed ids: the share is a hash of the agent's and the release's ids, and with ids drawn at random
# (the database's) "every organisation has some" was itself a draw — about 1.5 % of runs left one
# of four organisations of 25 without a canary at 20 %.
_IDS = UUID("6f1c1d8e-3a51-4c0b-9d55-0d5f3c6b2a10")


def test_the_canary_share_is_deterministic_and_spread_over_organisations() -> None:
    release, next_release = uuid5(_IDS, "release-1.6.0"), uuid5(_IDS, "release-1.7.0")
    orgs = [[uuid5(_IDS, f"org-{o}/web-{n:02d}") for n in range(25)] for o in range(4)]
    agents = [agent for org in orgs for agent in org]
    chosen = [a for a in agents if in_canary_share(a, release, 20)]
    # The same answer every time it is asked, and each organisation has some (20% of 25 each).
    assert chosen == [a for a in agents if in_canary_share(a, release, 20)]
    assert all(set(org) & set(chosen) for org in orgs)
    assert 5 <= len(chosen) <= 40
    # Each release picks its own share of the fleet.
    assert chosen != [a for a in agents if in_canary_share(a, next_release, 20)]
    assert not [a for a in agents if in_canary_share(a, release, 0)]
    assert len([a for a in agents if in_canary_share(a, release, 100)]) == 100


def test_a_failing_canary_halts_the_release_with_its_evidence_and_one_notice(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    rollout.settings(halt_failures=1, halt_rate_percent=50)
    org = rollout.make_org()
    failing, slow, late = (rollout.make_agent(org, f"canary-{n}") for n in range(3))
    others = [rollout.make_agent(org, f"web-{n:02d}") for n in range(3)]
    for agent in (failing, slow, late):
        rollout.mark_canary(agent)
    rollout.clock.set(AT_0301)
    failed_run = rollout.claim(failing).json()["run_id"]
    slow_grant = rollout.claim(slow).json()
    rollout.report(failing, failed_run, "rolled_back", "1.5.0")

    rollout.clock.advance(minutes=1)
    step = rollout.services.rollout.advance(rollout.clock.now())
    assert len(step.halts) == 1
    halt = step.halts[0]
    assert (halt.cause, halt.failures, halt.finished) == ("errors", 1, 1)
    assert [str(run) for run in halt.runs] == [failed_run]
    assert halt.revoked_tokens == 1
    # Asked again, nothing more: one halt, one notice.
    assert rollout.services.rollout.advance(rollout.clock.now()).halts == ()

    with rollout.api.client(slow.agent_key) as client:
        refused_download = client.get(slow_grant["release"]["artifact_url"])
    assert refused_download.json()["detail"]["code"] == "token_revoked"
    halted = rollout.claim(late)
    assert halted.status_code == 409
    assert halted.json()["detail"]["code"] == "release_halted"
    for agent in others:
        assert rollout.claim(agent).json()["release"]["version"] == "1.5.0"

    notices = rollout.operator("GET", "/v1/admin/notices").json()["notices"]
    assert len(notices) == 1
    assert notices[0]["kind"] == "release.halted"
    assert notices[0]["body"]["runs"] == [failed_run]
    assert notices[0]["body"]["version"] == "1.6.0"
    release_id = rollout.release_id("1.6.0")
    evidence = rollout.operator("GET", f"/v1/admin/releases/{release_id}/halts")
    assert evidence.json()["halts"][0]["runs"] == [failed_run]

    metrics = rollout.operator("GET", "/metrics").text
    assert (
        'nachtwacht_release_halted{channel="stable",platform="linux-x86_64",version="1.6.0"} 1'
        in metrics
    )

    trail = rollout.operator("GET", "/v1/admin/events?actor_kind=control_plane")
    assert trail.status_code == 200, trail.text
    assert [event["kind"] for event in trail.json()["events"]] == ["release.halted"]

    no_reason = rollout.operator("POST", f"/v1/admin/releases/{release_id}/resume")
    assert no_reason.status_code == 422
    resumed = rollout.operator(
        "POST",
        f"/v1/admin/releases/{release_id}/resume",
        reason="the disk check was wrong; fixed on the canary",
    )
    assert resumed.status_code == 200
    assert resumed.json()["resumed_by"] == "tests"
    # The slot skipped under the halt stays skipped; the next night's claims the release.
    assert rollout.claim(late).json()["detail"]["code"] == "slot_consumed"
    rollout.clock.set(datetime(2026, 12, 1, 2, 1, 15, tzinfo=UTC))
    assert rollout.claim(late, NEXT_SLOT).json()["release"]["version"] == "1.6.0"
    # The failure before the resume does not trip it again.
    assert rollout.services.rollout.advance(rollout.clock.now()).halts == ()


def test_good_canaries_promote_after_the_soak_and_the_next_night_everyone_updates_within_caps(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    # Two waves, as the two stages were: the marked canaries, then everyone.
    rollout.settings(
        soak_minutes=120,
        waves=[{"share_percent": 0, "canaries": True}, {"share_percent": 100}],
    )
    rollout.operator("PUT", "/v1/admin/settings", org_cap=2, global_cap=25)
    org = rollout.make_org()
    canary = rollout.make_agent(org, "canary-01")
    fleet = [rollout.make_agent(org, f"web-{n:02d}") for n in range(5)]
    rollout.mark_canary(canary)
    rollout.clock.set(AT_0301)
    run = rollout.claim(canary).json()["run_id"]
    rollout.report(canary, run, "succeeded", "1.6.0")

    rollout.clock.advance(minutes=119)
    assert rollout.services.rollout.advance(rollout.clock.now()).promotions == ()
    rollout.clock.advance(minutes=1)
    promoted = rollout.services.rollout.advance(rollout.clock.now()).promotions
    assert [(p.version, p.stage) for p in promoted] == [("1.6.0", "everyone")]
    event = rollout.only_event("release.promoted")
    assert event["actor_kind"] == "control_plane"
    assert event["data"]["after_soak"] is True

    rollout.clock.set(datetime(2026, 12, 1, 2, 0, 30, tzinfo=UTC))
    answers = [rollout.claim(agent, NEXT_SLOT) for agent in fleet]
    granted = [a for a in answers if a.status_code == 201]
    assert len(granted) == 2  # the organisation's cap per round, exactly
    assert {a.json()["release"]["version"] for a in granted} == {"1.6.0"}
    assert {a.json()["detail"]["code"] for a in answers if a.status_code != 201} == {"org_cap"}
    for _ in range(2):
        rollout.clock.advance(minutes=1)
        answers = [rollout.claim(agent, NEXT_SLOT) for agent in fleet]
    assert all(a.status_code in (200, 201) for a in answers)
    assert {a.json()["release"]["version"] for a in answers} == {"1.6.0"}


def test_a_held_agent_skips_its_slot_without_a_token(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org, stranger = rollout.make_org("Acme"), rollout.make_org("Other")
    agent = rollout.make_agent(org)
    rollout.clock.set(AT_0301)
    until = "2026-12-02T08:00:00Z"
    with rollout.api.client(org.panel_key) as panel:
        held = panel.put(
            f"/v1/agents/{agent.agent_id}/hold", json={"until": until, "reason": "audit"}
        )
    assert held.status_code == 200
    hold = {"until": until, "reason": "audit", "set_by": "customer"}
    assert held.json() == {**hold, "changed": True}
    assert rollout.config(agent)["hold"] == hold

    refused = rollout.claim(agent)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "held"
    again = rollout.claim(agent)  # the hold comes before the slot's run: the same answer
    assert again.json()["detail"]["code"] == "held"
    with rollout.pool.connection() as conn:
        runs = conn.execute(
            "SELECT status, miss_reason, (SELECT count(*) FROM tokens) AS tokens FROM runs"
        ).fetchall()
    assert [(r["status"], r["miss_reason"], r["tokens"]) for r in runs] == [("missed", "held", 0)]

    with rollout.api.client(stranger.panel_key) as panel:
        foreign = panel.put(f"/v1/agents/{agent.agent_id}/hold", json={"until": until})
        foreign_release = panel.get(f"/v1/agents/{agent.agent_id}/release")
        foreign_end = panel.delete(f"/v1/agents/{agent.agent_id}/hold")
        foreign_list = panel.get("/v1/agent-releases").json()["agents"]
    assert (foreign.status_code, foreign_release.status_code, foreign_end.status_code) == (
        404,
        404,
        404,
    )
    assert foreign_list == []
    assert rollout.config(agent)["hold"] == hold  # the stranger changed nothing


@pytest.mark.parametrize(
    ("until", "field_says"),
    [
        pytest.param("2026-11-30T02:00:00Z", "is not after now", id="in_the_past"),
        pytest.param("2027-03-01T02:00:00Z", "more than 90 days", id="over_90_days"),
    ],
)
def test_a_hold_must_end_in_the_future_within_90_days(
    rollout: Rollout, until: str, field_says: str
) -> None:
    agent = rollout.make_agent(rollout.make_org())
    rollout.clock.set(AT_0301)
    with rollout.api.client(agent.agent_key) as client:
        refused = client.put("/v1/agent/hold", json={"until": until})
    assert refused.status_code == 422
    assert refused.json()["detail"]["field"] == "until"
    assert field_says in refused.json()["detail"]["message"]


def test_the_host_holds_itself_and_ends_its_hold(rollout: Rollout) -> None:
    agent = rollout.make_agent(rollout.make_org())
    rollout.clock.set(AT_0301)
    with rollout.api.client(agent.agent_key) as client:
        held = client.put("/v1/agent/hold", json={"until": "2026-12-01T12:00:00Z"})
        assert held.json()["set_by"] == "agent"
        assert client.get("/v1/agent/config").json()["hold"]["set_by"] == "agent"
        assert client.delete("/v1/agent/hold").status_code == 204
        assert client.get("/v1/agent/config").json()["hold"] is None


def test_a_pinned_agent_is_offered_its_pin_and_is_up_to_date_there(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    assert rollout.promote("1.6.0").status_code == 200
    org = rollout.make_org()
    pinned, free = (
        rollout.make_agent(org, "db-01"),
        rollout.make_agent(rollout.make_org("Other"), "web-01"),
    )
    unknown = rollout.operator("PUT", f"/v1/admin/orgs/{org.org_id}/pin", version="9.9.9")
    assert unknown.status_code == 422
    pin = rollout.operator(
        "PUT",
        f"/v1/admin/orgs/{org.org_id}/pin",
        version="1.5.0",
        reason="their database needs 1.5",
    )
    assert pin.status_code == 200
    rollout.clock.set(AT_0301)
    assert rollout.config(pinned)["release"]["version"] == "1.5.0"
    assert rollout.config(free)["release"]["version"] == "1.6.0"
    grant = rollout.claim(pinned).json()
    assert grant["release"]["version"] == "1.5.0"
    rollout.report(pinned, grant["run_id"], "succeeded", "1.5.0")
    with rollout.api.client(org.panel_key) as panel:
        shown = panel.get(f"/v1/agents/{pinned.agent_id}/release").json()
    assert (shown["basis"], shown["pinned"], shown["up_to_date"]) == ("pinned", True, True)
    overview = rollout.operator("GET", "/v1/admin/rollout").json()
    assert overview["pairs"][0]["pinned"] == 1
    assert overview["pairs"][0]["up_to_date"] == 1

    assert rollout.operator("DELETE", f"/v1/admin/orgs/{org.org_id}/pin").status_code == 204
    assert rollout.config(pinned)["release"]["version"] == "1.6.0"


def test_a_manual_update_under_the_brake_or_a_halt_needs_an_operator_to_force_it(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org = rollout.make_org()
    agent = rollout.make_agent(org)
    rollout.clock.set(datetime(2026, 11, 30, 14, 7, tzinfo=UTC))
    # A manual update gets the agent's offer: 1.6.0 once it is for everyone.
    assert rollout.promote("1.6.0").status_code == 200
    release_id = rollout.release_id("1.6.0")
    braked = rollout.operator(
        "PUT",
        f"/v1/admin/releases/{release_id}/brake",
        engaged=True,
        reason="1.6.0 fills the disk",
    )
    assert braked.status_code == 200
    requested = rollout.request_manual(org, agent)
    refused = rollout.claim_manual(agent, requested)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "release_halted"

    forced = rollout.operator(
        "POST",
        f"/v1/admin/agents/{agent.agent_id}/forced-update",
        reason="the customer's support case 4711",
    )
    assert forced.status_code == 201
    assert forced.json()["run_id"] == requested  # the refused request, now forced
    assert rollout.config(agent)["manual_update"]["run_id"] == forced.json()["run_id"]
    granted = rollout.claim_manual(agent, forced.json()["run_id"])
    assert granted.status_code == 201
    assert rollout.only_event("update.forced")["actor_kind"] == "operator"

    rollout.operator("PUT", f"/v1/admin/releases/{release_id}/brake", engaged=False)
    rollout.operator("PUT", "/v1/admin/brake", engaged=True, reason="night freeze")
    under_brake = rollout.claim_manual(agent, rollout.request_manual(org, agent))
    assert under_brake.status_code == 503
    assert under_brake.json()["detail"]["code"] == "brake"


def test_a_release_brake_stops_that_release_only(
    rollout: Rollout,
    release_key: Ed25519PrivateKey,
    two_releases: TwoReleases,
    no_share: None,
) -> None:
    beta = sign_release(release_key, version="1.7.0-beta.1", manifest_version=50, channel="beta")
    rollout.services.releases.publish(
        beta.manifest, beta.signature, beta.artifact, now=rollout.clock.now()
    )
    org = rollout.make_org()
    stable, tester = rollout.make_agent(org, "web-01"), rollout.make_agent(org, "lab-01")
    rollout.clock.set(AT_0301)
    stable_id = rollout.release_id("1.5.0")
    no_reason = rollout.operator("PUT", f"/v1/admin/releases/{stable_id}/brake", engaged=True)
    assert no_reason.status_code == 422
    rollout.operator(
        "PUT",
        f"/v1/admin/releases/{stable_id}/brake",
        engaged=True,
        reason="stop 1.5.0",
    )
    assert rollout.claim(stable).json()["detail"]["code"] == "release_halted"
    assert rollout.claim(tester, channel="beta").json()["release"]["version"] == "1.7.0-beta.1"
    metrics = rollout.operator("GET", "/metrics").text
    assert (
        'nachtwacht_release_brake{channel="stable",platform="linux-x86_64",version="1.5.0"} 1'
        in metrics
    )
    assert (
        'nachtwacht_release_stage{channel="beta",current="true",platform="linux-x86_64",'
        'stage="everyone",version="1.7.0-beta.1"} 1' in metrics
    )


def test_publishing_straight_to_everyone_skips_the_canary_stage(
    rollout: Rollout,
    release_key: Ed25519PrivateKey,
    two_releases: TwoReleases,
) -> None:
    newest = sign_release(release_key, version="1.7.0", manifest_version=44)
    published = rollout.services.releases.publish(
        newest.manifest,
        newest.signature,
        newest.artifact,
        now=rollout.clock.now(),
        stage="everyone",
    )
    assert published.stage == "everyone"
