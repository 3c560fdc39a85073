"""A rollout in three waves over a few dozen agents, night by night on the settable clock: the
marked canary organisation first, then 30 % of the fleet, then everyone. The second wave's
failures halt it (by its own threshold, stricter than the settings'), and the third never
starts. Beside it: the forecast per wave and what publishing says.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from uuid import UUID

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.rollout.offer import CANARY_BUCKETS, canary_bucket
from tests.control_plane.api.conftest import AT_0301, NEXT_SLOT, Rollout, TwoReleases
from tests.control_plane.conftest import Agent, sign_release

THIRD_SLOT = "2026-12-02T03:00"
NIGHT_2 = datetime(2026, 12, 1, 2, 0, 30, tzinfo=UTC)
NIGHT_3 = datetime(2026, 12, 2, 2, 0, 30, tzinfo=UTC)

THREE_WAVES = [
    {"share_percent": 0, "canaries": True, "soak_minutes": 120},
    # Two failures halt this wave; the settings' threshold (three) would let it go on.
    {"share_percent": 30, "halt_failures": 2, "halt_rate_percent": 20},
    {"share_percent": 100},
]


def _in_second_wave(agent: Agent, release_id: str) -> bool:
    bucket = canary_bucket(UUID(agent.agent_id), UUID(release_id))
    return bucket < 30 * (CANARY_BUCKETS // 100)


def _fleet(rollout: Rollout, release_id: str) -> tuple[list[Agent], list[Agent]]:
    """Agents of one organisation until six fall in the 30 % and twelve outside it (the share
    is a hash of the ids, so the count is made certain rather than hoped for)."""
    org = rollout.make_org("Fleet")
    inside: list[Agent] = []
    outside: list[Agent] = []
    n = 0
    while len(inside) < 6 or len(outside) < 12:
        agent = rollout.make_agent(org, f"web-{n:02d}")
        n += 1
        group = inside if _in_second_wave(agent, release_id) else outside
        if len(group) < (6 if group is inside else 12):
            group.append(agent)
    return inside, outside


def _version(answer: object) -> str:
    body = answer.json()  # type: ignore[attr-defined]
    version: str = body["release"]["version"]
    return version


def test_three_waves_the_second_halts_on_its_failures_and_the_third_never_starts(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    rollout.settings(waves=THREE_WAVES)
    rollout.operator("PUT", "/v1/admin/settings", org_cap=25, global_cap=25)
    release_id = rollout.release_id("1.6.0")
    canary_org = rollout.make_org("Early birds")
    canaries = [rollout.make_agent(canary_org, f"early-{n}") for n in range(4)]
    marked = rollout.operator("PUT", f"/v1/admin/orgs/{canary_org.org_id}/canary", canary=True)
    assert marked.status_code == 200, marked.text
    second, rest = _fleet(rollout, release_id)

    # Night 1, wave 1: only the canary organisation takes 1.6.0.
    rollout.clock.set(AT_0301)
    for agent in canaries:
        grant = rollout.claim(agent)
        assert grant.status_code == 201, grant.text
        assert _version(grant) == "1.6.0"
        rollout.report(agent, grant.json()["run_id"], "succeeded", "1.6.0")
    assert {_version(rollout.claim(agent)) for agent in second + rest} == {"1.5.0"}

    # The first wave's soak (its own two hours) ends; the release moves to wave 2 of 3.
    rollout.clock.advance(minutes=119)
    assert rollout.services.rollout.advance(rollout.clock.now()).promotions == ()
    rollout.clock.advance(minutes=1)
    promoted = rollout.services.rollout.advance(rollout.clock.now()).promotions
    assert [(p.stage, p.wave, p.waves) for p in promoted] == [("canary", 2, 3)]

    # Night 2, wave 2: the 30 % (and the canaries, already on it); two of them fail.
    rollout.clock.set(NIGHT_2)
    failed_runs = {}
    for n, agent in enumerate(second):
        grant = rollout.claim(agent, NEXT_SLOT)
        assert grant.status_code == 201, grant.text
        assert _version(grant) == "1.6.0"
        failed = n < 2
        rollout.report(
            agent,
            grant.json()["run_id"],
            "failed" if failed else "succeeded",
            "1.5.0" if failed else "1.6.0",
        )
        if failed:
            failed_runs[grant.json()["run_id"]] = agent
    assert {_version(rollout.claim(agent, NEXT_SLOT)) for agent in rest} == {"1.5.0"}

    rollout.clock.advance(minutes=5)
    step = rollout.services.rollout.advance(rollout.clock.now())
    assert step.promotions == ()
    assert len(step.halts) == 1
    halt = step.halts[0]
    assert (halt.cause, halt.failures, halt.finished) == ("errors", 2, 6)
    evidence = rollout.operator("GET", f"/v1/admin/releases/{release_id}/halts").json()
    named = {
        run["run_id"]: (run["agent_id"], run["agent_name"], run["status"], run["to_version"])
        for run in evidence["halts"][0]["evidence"]
    }
    with rollout.pool.connection() as conn:
        rows = conn.execute("SELECT id::text AS id, name FROM agents").fetchall()
    names = {row["id"]: row["name"] for row in rows}
    assert named == {
        run_id: (agent.agent_id, names[agent.agent_id], "failed", "1.6.0")
        for run_id, agent in failed_runs.items()
    }

    # Days later the third wave has not started: no promotion while halted, and night 3 the
    # rest of the fleet is still offered 1.5.0.
    rollout.clock.set(NIGHT_3)
    assert rollout.services.rollout.advance(rollout.clock.now()).promotions == ()
    pair = rollout.operator("GET", "/v1/admin/rollout").json()["pairs"][0]
    assert (pair["stage"], pair["wave"], pair["waves"], pair["halted"]) == ("canary", 2, 3, True)
    assert {_version(rollout.claim(agent, THIRD_SLOT)) for agent in rest} == {"1.5.0"}


def test_an_agent_reached_by_a_wave_is_reached_by_every_later_one(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    """The share is one stable bucket per agent and release: the 10 % are among the 50 %."""
    rollout.settings(waves=[{"share_percent": 10}, {"share_percent": 50}, {"share_percent": 100}])
    rollout.operator("PUT", "/v1/admin/settings", org_cap=50, global_cap=50)
    release_id = rollout.release_id("1.6.0")
    org = rollout.make_org()
    fleet = [rollout.make_agent(org, f"web-{n:02d}") for n in range(40)]
    waves = {
        agent.agent_id: rollout.operator(
            "GET", f"/v1/admin/agents/{agent.agent_id}/release"
        ).json()["wave"]
        for agent in fleet
    }
    for agent in fleet:
        bucket = canary_bucket(UUID(agent.agent_id), UUID(release_id))
        expected = 1 if bucket < 1000 else 2 if bucket < 5000 else 3
        assert waves[agent.agent_id] == expected
    rollout.clock.set(AT_0301)
    first = {a.agent_id for a in fleet if _version(rollout.claim(a)) == "1.6.0"}
    assert first == {agent_id for agent_id, wave in waves.items() if wave == 1}
    path = f"/v1/admin/releases/{release_id}/promote"
    assert rollout.operator("POST", path, reason="wave 1 fine", wave=2).status_code == 200
    rollout.clock.set(NIGHT_2)
    second = {a.agent_id for a in fleet if _version(rollout.claim(a, NEXT_SLOT)) == "1.6.0"}
    assert first <= second
    assert second == {agent_id for agent_id, wave in waves.items() if wave <= 2}


def test_the_forecast_counts_each_wave_and_publishing_says_what_the_first_reaches(
    rollout: Rollout, two_releases: TwoReleases, release_key: Ed25519PrivateKey
) -> None:
    rollout.settings(waves=THREE_WAVES)
    rollout.operator("PUT", "/v1/admin/settings", org_cap=25, global_cap=25)
    canary_org = rollout.make_org("Early birds")
    canaries = [rollout.make_agent(canary_org, f"early-{n}") for n in range(3)]
    rollout.operator("PUT", f"/v1/admin/orgs/{canary_org.org_id}/canary", canary=True)
    org = rollout.make_org("Fleet")
    fleet = [rollout.make_agent(org, f"web-{n:02d}") for n in range(20)]
    release_id = rollout.release_id("1.6.0")
    in_second = sum(_in_second_wave(agent, release_id) for agent in fleet)

    forecast = rollout.operator("GET", "/v1/admin/forecast?date=2026-11-30").json()
    night = forecast["releases"][0]
    assert night["wave"] == 1
    assert [(w["position"], w["agents"]) for w in night["waves"]] == [
        (1, len(canaries)),
        (2, len(canaries) + in_second),
        (3, len(canaries) + len(fleet)),
    ]
    assert night["canary"]["agents"] == len(canaries)
    assert night["everyone"]["agents"] == len(canaries) + len(fleet)

    # Publishing 1.7.0 at 16:00 (CET) says: wave 1 of 3, the canaries, at 03:00 tonight.
    rollout.clock.set(datetime(2026, 11, 30, 15, 0, tzinfo=UTC))
    newer = sign_release(release_key, version="1.7.0", manifest_version=44)
    published = rollout.operator(
        "POST",
        "/v1/admin/releases",
        manifest_b64=base64.b64encode(newer.manifest).decode(),
        signature_b64=base64.b64encode(newer.signature).decode(),
        artifact_b64=base64.b64encode(newer.artifact).decode(),
    )
    assert published.status_code == 201, published.text
    body = published.json()
    assert (body["stage"], body["wave"], body["waves"]) == ("canary", 1, 3)
    outlook = body["first_wave"]
    assert (outlook["wave"], outlook["canaries"], outlook["agents"]) == (1, True, 3)
    assert outlook["first_slot_at"] == "2026-12-01T02:00:00Z"
    assert outlook["first_slot_local_time"] == "2026-12-01T03:00:00+01:00"
    assert outlook["will_miss"] == 0


def test_marking_an_organisation_a_canary_changes_its_agents_offer_at_once(
    rollout: Rollout, two_releases: TwoReleases, no_share: None
) -> None:
    org, other = rollout.make_org("Early birds"), rollout.make_org("Others")
    agent, stranger = rollout.make_agent(org), rollout.make_agent(other)
    assert rollout.config(agent)["release"]["version"] == "1.5.0"
    path = f"/v1/admin/orgs/{org.org_id}/canary"
    assert rollout.operator("PUT", path, canary=True).json() == {
        "org_id": org.org_id,
        "canary": True,
    }
    assert rollout.config(agent)["release"]["version"] == "1.6.0"
    assert rollout.config(stranger)["release"]["version"] == "1.5.0"
    marked = rollout.operator("GET", f"/v1/admin/agents/{agent.agent_id}/release").json()
    assert (marked["wave"], marked["basis"]) == (1, "canary")
    assert rollout.operator("PUT", path, canary=False).status_code == 200
    assert rollout.config(agent)["release"]["version"] == "1.5.0"

    unknown = rollout.operator(
        "PUT", "/v1/admin/orgs/00000000-0000-4000-8000-000000000000/canary", canary=True
    )
    assert unknown.status_code == 404
    assert unknown.json()["detail"]["code"] == "org_not_found"


def test_with_one_wave_a_release_is_for_everyone_at_once(
    rollout: Rollout, release_key: Ed25519PrivateKey
) -> None:
    rollout.settings(waves=[{"share_percent": 100}])
    for version, manifest_version in (("1.5.0", 42), ("1.6.0", 43)):
        signed = sign_release(release_key, version=version, manifest_version=manifest_version)
        published = rollout.services.releases.publish(
            signed.manifest, signed.signature, signed.artifact, now=rollout.clock.now()
        )
        assert (published.stage, published.wave, published.waves) == ("everyone", 1, 1)


def test_a_first_wave_left_with_no_share_and_no_canaries_is_refused(rollout: Rollout) -> None:
    rollout.settings(waves=[{"share_percent": 10}, {"share_percent": 100}])
    refused = rollout.operator("PATCH", "/v1/admin/rollout/settings", canary_share_percent=0)
    assert refused.status_code == 422
    assert refused.json()["detail"]["field"] == "canary_share_percent"
    assert (
        rollout.operator("GET", "/v1/admin/rollout/settings").json()["waves"][0]["share_percent"]
        == 10
    )


def _small_fleet(rollout: Rollout, release_id: str) -> tuple[list[Agent], list[Agent], list[Agent]]:
    """Two marked canaries, then agents of another organisation until three fall outside the
    30 % of `THREE_WAVES`' second wave and one inside it."""
    # Caps wide enough that every agent's claim is granted.
    capped = rollout.operator("PUT", "/v1/admin/settings", org_cap=100, global_cap=100)
    assert capped.status_code == 200, capped.text
    canary_org = rollout.make_org("Early birds")
    canaries = [rollout.make_agent(canary_org, f"early-{n}") for n in range(2)]
    marked = rollout.operator("PUT", f"/v1/admin/orgs/{canary_org.org_id}/canary", canary=True)
    assert marked.status_code == 200, marked.text
    org = rollout.make_org("Fleet")
    inside: list[Agent] = []
    outside: list[Agent] = []
    n = 0
    while not inside or len(outside) < 3:
        agent = rollout.make_agent(org, f"web-{n:02d}")
        n += 1
        (inside if _in_second_wave(agent, release_id) else outside).append(agent)
    return canaries, inside, outside


def test_a_wave_that_reaches_nobody_new_moves_on_after_its_soak(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    """In a small fleet a share may be nobody: the second wave here reaches only pinned agents,
    so no run of it will ever succeed. It must not hold the release back for good."""
    rollout.settings(
        waves=[
            {**THREE_WAVES[0]},
            {"share_percent": 30, "soak_minutes": 60},
            {"share_percent": 100},
        ]
    )
    release_id = rollout.release_id("1.6.0")
    canaries, inside, outside = _small_fleet(rollout, release_id)
    for agent in inside:  # the wave's only agents: pinned, so no wave decides what they get
        pinned = rollout.operator(
            "PUT", f"/v1/admin/agents/{agent.agent_id}/pin", version="1.5.0", reason="db"
        )
        assert pinned.status_code == 200, pinned.text

    rollout.clock.set(AT_0301)
    for agent in canaries:
        grant = rollout.claim(agent)
        assert _version(grant) == "1.6.0"
        rollout.report(agent, grant.json()["run_id"], "succeeded", "1.6.0")
    assert {_version(rollout.claim(agent)) for agent in inside + outside} == {"1.5.0"}
    rollout.clock.advance(minutes=120)
    promoted = rollout.services.rollout.advance(rollout.clock.now()).promotions
    assert [(p.stage, p.wave) for p in promoted] == [("canary", 2)]

    # Wave 2 began with nobody new in it: its own soak (an hour) from then, and it moves on.
    rollout.clock.advance(minutes=59)
    assert rollout.services.rollout.advance(rollout.clock.now()).promotions == ()
    rollout.clock.advance(minutes=1)
    promoted = rollout.services.rollout.advance(rollout.clock.now()).promotions
    assert [(p.stage, p.wave, p.waves) for p in promoted] == [("everyone", 3, 3)]
    assert {rollout.config(agent)["release"]["version"] for agent in outside} == {"1.6.0"}


def test_a_wave_that_reaches_someone_new_waits_for_a_success_however_long(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    rollout.settings(
        waves=[
            {**THREE_WAVES[0]},
            {"share_percent": 30, "soak_minutes": 60},
            {"share_percent": 100},
        ]
    )
    release_id = rollout.release_id("1.6.0")
    canaries, inside, outside = _small_fleet(rollout, release_id)
    rollout.clock.set(AT_0301)
    for agent in canaries:
        grant = rollout.claim(agent)
        rollout.report(agent, grant.json()["run_id"], "succeeded", "1.6.0")
    assert {_version(rollout.claim(agent)) for agent in inside + outside} == {"1.5.0"}
    rollout.clock.advance(minutes=120)
    assert len(rollout.services.rollout.advance(rollout.clock.now()).promotions) == 1

    # The wave's agents have not updated yet (their next slot is tomorrow): it waits for them.
    rollout.clock.advance(minutes=600)
    assert rollout.services.rollout.advance(rollout.clock.now()).promotions == ()
    pair = rollout.operator("GET", "/v1/admin/rollout").json()["pairs"][0]
    assert (pair["stage"], pair["wave"]) == ("canary", 2)
