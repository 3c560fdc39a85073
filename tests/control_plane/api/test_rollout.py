"""Releases for a real fleet (issue 14, items 3-7), over real HTTP against a real PostgreSQL:
the canary stage and its promotion after the soak, the halt on errors with its evidence and one
operator notice, holds, pins, the brake per release and forced manual updates, `/metrics`.

The 03:00 slot of 2026-11-30 in Europe/Amsterdam (CET) is 02:00 UTC; its window closes at 02:15.
The next night's is 2026-12-01T02:00Z.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from uuid import UUID, uuid5

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control_plane.registry import Services
from control_plane.rollout.offer import in_canary_share
from control_plane.types import Pool
from nachtwacht.worlds.clocks import ManualClock
from tests.control_plane.conftest import Agent, Api, Org, SignedRelease, sign_release

SLOT = "2026-11-30T03:00"
NEXT_SLOT = "2026-12-01T03:00"
AT_0301 = datetime(2026, 11, 30, 2, 1, 15, tzinfo=UTC)


@pytest.fixture
def two_releases(
    services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> tuple[SignedRelease, SignedRelease]:
    """Stable 1.5.0 (the pair's first: everyone), then 1.6.0 (in its canary stage)."""
    old = sign_release(release_key, version="1.5.0", manifest_version=42)
    new = sign_release(release_key, version="1.6.0", manifest_version=43)
    for release in (old, new):
        services.releases.publish(
            release.manifest, release.signature, release.artifact, now=clock.now()
        )
    return old, new


def _release_id(services: Services, version: str) -> str:
    for track in services.releases.list().tracks:
        for entry in track.releases:
            if entry.version == version:
                return str(entry.id)
    raise AssertionError(f"no release {version}")


def _claim(api: Api, agent: Agent, slot: str = SLOT, **extra: Any) -> httpx.Response:
    with api.client(agent.agent_key) as client:
        return client.post(
            "/v1/agent/claims", json={"slot_key": slot, "from_version": "1.5.0", **extra}
        )


def _report(api: Api, agent: Agent, run_id: str, status: str, version: str) -> None:
    with api.client(agent.agent_key) as client:
        answer = client.patch(
            f"/v1/agent/runs/{run_id}", json={"status": status, "version": version}
        )
    assert answer.status_code == 200, answer.text


def _operator(api: Api, key: str, method: str, path: str, **body: Any) -> httpx.Response:
    with api.client(key) as operator:
        return operator.request(method, path, json=body or None)


def _config(api: Api, agent: Agent) -> dict[str, Any]:
    with api.client(agent.agent_key) as client:
        answer = client.get("/v1/agent/config")
    assert answer.status_code == 200
    body: dict[str, Any] = answer.json()
    return body


@pytest.fixture
def no_share(api: Api, operator_key: str) -> None:
    """Only the agents an operator marks are canaries (the share is 0%)."""
    answer = _operator(
        api, operator_key, "PATCH", "/v1/admin/rollout/settings", canary_share_percent=0
    )
    assert answer.status_code == 200


def test_the_first_release_of_a_pair_is_for_everyone_and_the_next_starts_as_canary(
    services: Services, release_key: Ed25519PrivateKey, clock: ManualClock
) -> None:
    stages = []
    for version, manifest_version in (("1.5.0", 42), ("1.6.0", 43)):
        release = sign_release(release_key, version=version, manifest_version=manifest_version)
        stages.append(
            services.releases.publish(
                release.manifest, release.signature, release.artifact, now=clock.now()
            ).stage
        )
    assert stages == ["everyone", "canary"]
    overview = services.rollout.overview(AT_0301)
    assert [(pair.version, pair.stage) for pair in overview.pairs] == [("1.6.0", "canary")]


def test_canaries_get_the_canary_release_and_everyone_else_the_previous(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    no_share: None,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    canary, other = make_agent(org, "canary-01"), make_agent(org, "web-01")
    marked = _operator(
        api, operator_key, "PUT", f"/v1/admin/agents/{canary.agent_id}/canary", canary=True
    )
    assert marked.json() == {"agent_id": canary.agent_id, "canary": True}
    clock.set(AT_0301)

    assert _config(api, canary)["release"]["version"] == "1.6.0"
    assert _config(api, other)["release"]["version"] == "1.5.0"
    assert _claim(api, canary).json()["release"]["version"] == "1.6.0"
    assert _claim(api, other).json()["release"]["version"] == "1.5.0"

    with api.client(org.panel_key) as panel:
        shown = panel.get(f"/v1/agents/{other.agent_id}/release").json()
    assert shown["track"] == {"channel": "stable", "platform": "linux-x86_64"}
    assert shown["offered"]["version"] == "1.5.0"
    assert shown["basis"] == "previous"
    assert shown["canary"] is False
    with api.client(org.panel_key) as panel:
        listed = panel.get("/v1/agent-releases").json()["agents"]
    assert [(a["agent_id"], a["offered"]["version"], a["basis"]) for a in listed] == [
        (canary.agent_id, "1.6.0", "canary"),
        (other.agent_id, "1.5.0", "previous"),
    ]
    with api.client(operator_key) as operator:
        same = operator.get(f"/v1/admin/orgs/{org.org_id}/agent-releases").json()["agents"]
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
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    no_share: None,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    settings = _operator(
        api,
        operator_key,
        "PATCH",
        "/v1/admin/rollout/settings",
        halt_failures=1,
        halt_rate_percent=50,
    )
    assert settings.status_code == 200
    org = make_org()
    failing, slow, late = (make_agent(org, f"canary-{n}") for n in range(3))
    others = [make_agent(org, f"web-{n:02d}") for n in range(3)]
    for agent in (failing, slow, late):
        _operator(
            api, operator_key, "PUT", f"/v1/admin/agents/{agent.agent_id}/canary", canary=True
        )
    clock.set(AT_0301)
    failed_run = _claim(api, failing).json()["run_id"]
    slow_grant = _claim(api, slow).json()
    _report(api, failing, failed_run, "rolled_back", "1.5.0")

    clock.advance(minutes=1)
    step = services.rollout.advance(clock.now())
    assert len(step.halts) == 1
    halt = step.halts[0]
    assert (halt.cause, halt.failures, halt.finished) == ("errors", 1, 1)
    assert [str(run) for run in halt.runs] == [failed_run]
    assert halt.revoked_tokens == 1
    # Asked again, nothing more: one halt, one notice.
    assert services.rollout.advance(clock.now()).halts == ()

    with api.client(slow.agent_key) as client:
        refused_download = client.get(slow_grant["release"]["artifact_url"])
    assert refused_download.json()["detail"]["code"] == "token_revoked"
    halted = _claim(api, late)
    assert halted.status_code == 503
    assert halted.json()["detail"]["code"] == "release_halted"
    for agent in others:
        assert _claim(api, agent).json()["release"]["version"] == "1.5.0"

    notices = _operator(api, operator_key, "GET", "/v1/admin/notices").json()["notices"]
    assert len(notices) == 1
    assert notices[0]["kind"] == "release.halted"
    assert notices[0]["body"]["runs"] == [failed_run]
    assert notices[0]["body"]["version"] == "1.6.0"
    release_id = _release_id(services, "1.6.0")
    evidence = _operator(api, operator_key, "GET", f"/v1/admin/releases/{release_id}/halts")
    assert evidence.json()["halts"][0]["runs"] == [failed_run]

    with api.client(operator_key) as operator:
        metrics = operator.get("/metrics").text
    assert (
        'nachtwacht_release_halted{channel="stable",platform="linux-x86_64",version="1.6.0"} 1'
        in metrics
    )

    trail = _operator(api, operator_key, "GET", "/v1/admin/events?actor_kind=control_plane")
    assert trail.status_code == 200, trail.text
    assert [event["kind"] for event in trail.json()["events"]] == ["release.halted"]

    no_reason = _operator(api, operator_key, "POST", f"/v1/admin/releases/{release_id}/resume")
    assert no_reason.status_code == 422
    resumed = _operator(
        api,
        operator_key,
        "POST",
        f"/v1/admin/releases/{release_id}/resume",
        reason="the disk check was wrong; fixed on the canary",
    )
    assert resumed.status_code == 200
    assert resumed.json()["resumed_by"] == "tests"
    assert _claim(api, late).json()["release"]["version"] == "1.6.0"
    # The failure before the resume does not trip it again.
    assert services.rollout.advance(clock.now()).halts == ()


def test_good_canaries_promote_after_the_soak_and_the_next_night_everyone_updates_within_caps(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    no_share: None,
    operator_key: str,
    pool: Pool,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    _operator(api, operator_key, "PATCH", "/v1/admin/rollout/settings", soak_minutes=120)
    _operator(api, operator_key, "PUT", "/v1/admin/settings", org_cap=2, global_cap=25)
    org = make_org()
    canary = make_agent(org, "canary-01")
    fleet = [make_agent(org, f"web-{n:02d}") for n in range(5)]
    _operator(api, operator_key, "PUT", f"/v1/admin/agents/{canary.agent_id}/canary", canary=True)
    clock.set(AT_0301)
    run = _claim(api, canary).json()["run_id"]
    _report(api, canary, run, "succeeded", "1.6.0")

    clock.advance(minutes=119)
    assert services.rollout.advance(clock.now()).promotions == ()
    clock.advance(minutes=1)
    promoted = services.rollout.advance(clock.now()).promotions
    assert [(p.version, p.stage) for p in promoted] == [("1.6.0", "everyone")]
    with pool.connection() as conn:
        event = conn.execute(
            "SELECT actor_kind, data FROM events WHERE kind = 'release.promoted'"
        ).fetchone()
    assert event is not None
    assert event["actor_kind"] == "control_plane"
    assert event["data"]["after_soak"] is True

    clock.set(datetime(2026, 12, 1, 2, 0, 30, tzinfo=UTC))
    answers = [_claim(api, agent, NEXT_SLOT) for agent in fleet]
    granted = [a for a in answers if a.status_code == 201]
    assert len(granted) == 2  # the organisation's cap per round, exactly
    assert {a.json()["release"]["version"] for a in granted} == {"1.6.0"}
    assert {a.json()["detail"]["code"] for a in answers if a.status_code != 201} == {"org_cap"}
    for _ in range(2):
        clock.advance(minutes=1)
        answers = [_claim(api, agent, NEXT_SLOT) for agent in fleet]
    assert all(a.status_code in (200, 201) for a in answers)
    assert {a.json()["release"]["version"] for a in answers} == {"1.6.0"}


def test_a_held_agent_skips_its_slot_without_a_token(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    pool: Pool,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org, stranger = make_org("Acme"), make_org("Other")
    agent = make_agent(org)
    clock.set(AT_0301)
    until = "2026-12-02T08:00:00Z"
    with api.client(org.panel_key) as panel:
        held = panel.put(
            f"/v1/agents/{agent.agent_id}/hold", json={"until": until, "reason": "audit"}
        )
    assert held.status_code == 200
    assert held.json() == {"until": until, "reason": "audit", "set_by": "customer"}
    assert _config(api, agent)["hold"] == held.json()

    refused = _claim(api, agent)
    assert refused.status_code == 409
    assert refused.json()["detail"]["code"] == "held"
    again = _claim(api, agent)
    assert again.json()["detail"]["code"] == "slot_consumed"
    with pool.connection() as conn:
        runs = conn.execute(
            "SELECT status, miss_reason, (SELECT count(*) FROM tokens) AS tokens FROM runs"
        ).fetchall()
    assert [(r["status"], r["miss_reason"], r["tokens"]) for r in runs] == [("missed", "held", 0)]

    with api.client(stranger.panel_key) as panel:
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
    assert _config(api, agent)["hold"] == held.json()  # the stranger changed nothing


@pytest.mark.parametrize(
    ("until", "field_says"),
    [
        pytest.param("2026-11-30T02:00:00Z", "is not after now", id="in_the_past"),
        pytest.param("2027-03-01T02:00:00Z", "more than 90 days", id="over_90_days"),
    ],
)
def test_a_hold_must_end_in_the_future_within_90_days(
    api: Api,
    clock: ManualClock,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
    until: str,
    field_says: str,
) -> None:
    agent = make_agent(make_org())
    clock.set(AT_0301)
    with api.client(agent.agent_key) as client:
        refused = client.put("/v1/agent/hold", json={"until": until})
    assert refused.status_code == 422
    assert refused.json()["detail"]["field"] == "until"
    assert field_says in refused.json()["detail"]["message"]


def test_the_host_holds_itself_and_ends_its_hold(
    api: Api, clock: ManualClock, make_org: Callable[..., Org], make_agent: Callable[..., Agent]
) -> None:
    agent = make_agent(make_org())
    clock.set(AT_0301)
    with api.client(agent.agent_key) as client:
        held = client.put("/v1/agent/hold", json={"until": "2026-12-01T12:00:00Z"})
        assert held.json()["set_by"] == "agent"
        assert client.get("/v1/agent/config").json()["hold"]["set_by"] == "agent"
        assert client.delete("/v1/agent/hold").status_code == 204
        assert client.get("/v1/agent/config").json()["hold"] is None


def test_a_pinned_agent_is_offered_its_pin_and_is_up_to_date_there(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    release_id = _release_id(services, "1.6.0")
    assert (
        _operator(
            api,
            operator_key,
            "POST",
            f"/v1/admin/releases/{release_id}/promote",
            reason="canaries fine",
        ).status_code
        == 200
    )
    org = make_org()
    pinned, free = make_agent(org, "db-01"), make_agent(make_org("Other"), "web-01")
    unknown = _operator(
        api, operator_key, "PUT", f"/v1/admin/orgs/{org.org_id}/pin", version="9.9.9"
    )
    assert unknown.status_code == 422
    pin = _operator(
        api,
        operator_key,
        "PUT",
        f"/v1/admin/orgs/{org.org_id}/pin",
        version="1.5.0",
        reason="their database needs 1.5",
    )
    assert pin.status_code == 200
    clock.set(AT_0301)
    assert _config(api, pinned)["release"]["version"] == "1.5.0"
    assert _config(api, free)["release"]["version"] == "1.6.0"
    grant = _claim(api, pinned).json()
    assert grant["release"]["version"] == "1.5.0"
    _report(api, pinned, grant["run_id"], "succeeded", "1.5.0")
    with api.client(org.panel_key) as panel:
        shown = panel.get(f"/v1/agents/{pinned.agent_id}/release").json()
    assert (shown["basis"], shown["pinned"], shown["up_to_date"]) == ("pinned", True, True)
    overview = _operator(api, operator_key, "GET", "/v1/admin/rollout").json()
    assert overview["pairs"][0]["pinned"] == 1
    assert overview["pairs"][0]["up_to_date"] == 1

    assert (
        _operator(api, operator_key, "DELETE", f"/v1/admin/orgs/{org.org_id}/pin").status_code
        == 204
    )
    assert _config(api, pinned)["release"]["version"] == "1.6.0"


def test_a_manual_update_under_the_brake_or_a_halt_needs_an_operator_to_force_it(
    api: Api,
    services: Services,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
    operator_key: str,
    pool: Pool,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    org = make_org()
    agent = make_agent(org)
    clock.set(datetime(2026, 11, 30, 14, 7, tzinfo=UTC))
    # A manual update gets the pair's current release.
    release_id = _release_id(services, "1.6.0")
    braked = _operator(
        api,
        operator_key,
        "PUT",
        f"/v1/admin/releases/{release_id}/brake",
        engaged=True,
        reason="1.6.0 fills the disk",
    )
    assert braked.status_code == 200
    with api.client(org.panel_key) as panel:
        requested = panel.post(f"/v1/agents/{agent.agent_id}/update").json()
    with api.client(agent.agent_key) as client:
        refused = client.post("/v1/agent/claims", json={"manual_run_id": requested["run_id"]})
    assert refused.status_code == 503
    assert refused.json()["detail"]["code"] == "release_halted"

    forced = _operator(
        api,
        operator_key,
        "POST",
        f"/v1/admin/agents/{agent.agent_id}/forced-update",
        reason="the customer's support case 4711",
    )
    assert forced.status_code == 201
    assert forced.json()["run_id"] == requested["run_id"]  # the refused request, now forced
    with api.client(agent.agent_key) as client:
        assert (
            client.get("/v1/agent/config").json()["manual_update"]["run_id"]
            == forced.json()["run_id"]
        )
        granted = client.post("/v1/agent/claims", json={"manual_run_id": forced.json()["run_id"]})
    assert granted.status_code == 201
    with pool.connection() as conn:
        trail = conn.execute(
            "SELECT actor_kind, data FROM events WHERE kind = 'update.forced'"
        ).fetchone()
    assert trail is not None
    assert trail["actor_kind"] == "operator"

    _operator(api, operator_key, "PUT", f"/v1/admin/releases/{release_id}/brake", engaged=False)
    _operator(api, operator_key, "PUT", "/v1/admin/brake", engaged=True, reason="night freeze")
    with api.client(org.panel_key) as panel:
        second = panel.post(f"/v1/agents/{agent.agent_id}/update").json()
    with api.client(agent.agent_key) as client:
        under_brake = client.post("/v1/agent/claims", json={"manual_run_id": second["run_id"]})
    assert under_brake.status_code == 503
    assert under_brake.json()["detail"]["code"] == "brake"


def test_a_release_brake_stops_that_release_only(
    api: Api,
    services: Services,
    clock: ManualClock,
    release_key: Ed25519PrivateKey,
    two_releases: tuple[SignedRelease, SignedRelease],
    no_share: None,
    operator_key: str,
    make_org: Callable[..., Org],
    make_agent: Callable[..., Agent],
) -> None:
    beta = sign_release(release_key, version="1.7.0-beta.1", manifest_version=50, channel="beta")
    services.releases.publish(beta.manifest, beta.signature, beta.artifact, now=clock.now())
    org = make_org()
    stable, tester = make_agent(org, "web-01"), make_agent(org, "lab-01")
    clock.set(AT_0301)
    stable_id = _release_id(services, "1.5.0")
    no_reason = _operator(
        api, operator_key, "PUT", f"/v1/admin/releases/{stable_id}/brake", engaged=True
    )
    assert no_reason.status_code == 422
    _operator(
        api,
        operator_key,
        "PUT",
        f"/v1/admin/releases/{stable_id}/brake",
        engaged=True,
        reason="stop 1.5.0",
    )
    assert _claim(api, stable).json()["detail"]["code"] == "release_halted"
    assert _claim(api, tester, channel="beta").json()["release"]["version"] == "1.7.0-beta.1"
    with api.client(operator_key) as operator:
        metrics = operator.get("/metrics").text
    assert (
        'nachtwacht_release_brake{channel="stable",platform="linux-x86_64",version="1.5.0"} 1'
        in metrics
    )
    assert (
        'nachtwacht_release_stage{channel="beta",current="true",platform="linux-x86_64",'
        'stage="everyone",version="1.7.0-beta.1"} 1' in metrics
    )


def test_publishing_straight_to_everyone_skips_the_canary_stage(
    services: Services,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
    two_releases: tuple[SignedRelease, SignedRelease],
) -> None:
    newest = sign_release(release_key, version="1.7.0", manifest_version=44)
    published = services.releases.publish(
        newest.manifest, newest.signature, newest.artifact, now=clock.now(), stage="everyone"
    )
    assert published.stage == "everyone"
