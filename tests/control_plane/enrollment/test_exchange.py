"""`POST /v1/agent/enroll` over real HTTP: a token becomes an agent and its own credential, once
per use; every refusal has its code and changes nothing; the trail names the token, never its
secret."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from control_plane.events.trail import Actor
from ground.contract import CONFIG_PATH, ENROLL_PATH
from tests.control_plane.enrollment.conftest import Enrollment

OPERATOR = Actor(kind="operator", name="cli:tests")


def test_a_token_becomes_an_agent_with_its_own_credential_and_the_default_schedule(
    world: Enrollment,
) -> None:
    issued = world.token()
    answer = world.enroll(issued.secret, "web-01.example.internal")
    assert answer.status_code == 201, answer.text
    enrolled = answer.json()
    assert enrolled["org_id"] == world.org.org_id
    assert enrolled["name"] == "web-01.example.internal"
    assert enrolled["credential"].startswith("nwa_")
    with world.api.client(enrolled["credential"]) as agent:
        config = agent.get(CONFIG_PATH)
    assert config.status_code == 200, config.text
    assert config.json()["agent_id"] == enrolled["agent_id"]
    assert config.json()["schedule"]["enabled"] is True
    assert config.json()["schedule"]["times"] == ["03:00"]
    (listed,) = world.services.enrollment.list(org_id=None, now=world.clock.now()).tokens
    assert (listed.uses, listed.uses_left, listed.state) == (1, 0, "used_up")


def test_a_single_use_token_used_twice_is_refused_the_second_time(world: Enrollment) -> None:
    issued = world.token()
    assert world.enroll(issued.secret, "web-01").status_code == 201
    before = world.footprint()
    second = world.enroll(issued.secret, "web-02")
    assert second.status_code == 401
    assert second.json()["detail"]["code"] == "enrollment_token_used_up"
    assert "no use left" in second.json()["detail"]["message"]
    assert world.footprint() == before


def test_a_single_use_token_used_by_many_hosts_at_once_makes_exactly_one_agent(
    world: Enrollment,
) -> None:
    issued = world.token()
    hosts = 8
    start = threading.Barrier(hosts)

    def enroll(number: int) -> int:
        with httpx.Client(base_url=world.api.base_url, timeout=60) as client:
            start.wait()
            return client.post(
                ENROLL_PATH,
                json={"name": f"web-{number:02d}"},
                headers={"Authorization": f"Bearer {issued.secret}"},
            ).status_code

    with ThreadPoolExecutor(max_workers=hosts) as pool:
        statuses = sorted(pool.map(enroll, range(hosts)))
    assert statuses == [201] + [401] * (hosts - 1)
    assert world.footprint().agents == 1
    assert world.footprint().uses == {issued.token.id: 1}
    assert len(world.events("enrollment_token.used")) == 1
    assert len(world.events("enrollment_token.refused")) == hosts - 1


def test_a_token_of_many_uses_used_at_once_by_more_hosts_than_uses(world: Enrollment) -> None:
    issued = world.token(uses=3)
    hosts = 8
    start = threading.Barrier(hosts)

    def enroll(number: int) -> int:
        with httpx.Client(base_url=world.api.base_url, timeout=60) as client:
            start.wait()
            return client.post(
                ENROLL_PATH,
                json={"name": f"db-{number:02d}"},
                headers={"Authorization": f"Bearer {issued.secret}"},
            ).status_code

    with ThreadPoolExecutor(max_workers=hosts) as pool:
        statuses = sorted(pool.map(enroll, range(hosts)))
    assert statuses == [201] * 3 + [401] * 5
    assert world.footprint().agents == 3


def test_an_unknown_and_a_revoked_token_get_the_same_answer(world: Enrollment) -> None:
    issued = world.token(uses=5)
    world.services.enrollment.revoke(
        issued.token.id, org_id=None, now=world.clock.now(), actor=OPERATOR
    )
    before = world.footprint()
    revoked = world.enroll(issued.secret)
    unknown = world.enroll("nwe_" + "A" * 43)
    assert revoked.status_code == unknown.status_code == 401
    assert revoked.json() == unknown.json()
    assert revoked.json()["detail"]["code"] == "enrollment_token_refused"
    assert world.footprint() == before
    # The revoked token's refusal is on the trail (it names an organisation); the unknown one
    # names none, so it is not.
    (refusal,) = world.events("enrollment_token.refused")
    assert refusal["data"]["reason"] == "enrollment_token_refused"


def test_no_token_at_all_is_refused(world: Enrollment) -> None:
    answer = world.enroll(None)
    assert answer.status_code == 401
    assert answer.json()["detail"]["code"] == "enrollment_token_refused"


def test_an_agent_credential_is_not_an_enrollment_token(world: Enrollment) -> None:
    issued = world.token()
    agent_key = world.enroll(issued.secret, "web-01").json()["credential"]
    before = world.footprint()
    answer = world.enroll(agent_key, "web-02")
    assert answer.status_code == 401
    assert answer.json()["detail"]["code"] == "enrollment_token_refused"
    assert world.footprint() == before


def test_an_expired_token_is_refused_with_its_own_code(world: Enrollment) -> None:
    issued = world.token(uses=5)
    world.later(hours=24)
    before = world.footprint()
    answer = world.enroll(issued.secret)
    assert answer.status_code == 401
    assert answer.json()["detail"]["code"] == "enrollment_token_expired"
    assert "expired at 2026-12-01T01:00:00Z" in answer.json()["detail"]["message"]
    assert world.footprint() == before


def test_a_token_is_good_until_just_before_its_expiry(world: Enrollment) -> None:
    issued = world.token()
    world.later(hours=24, seconds=-1)
    assert world.enroll(issued.secret).status_code == 201


def test_a_name_against_the_pattern_is_refused_and_nothing_is_spent(world: Enrollment) -> None:
    issued = world.token(name_pattern="web-*.example.internal")
    before = world.footprint()
    # The pattern is matched against the whole name, case-sensitively.
    for name in (
        "db-01.example.internal",
        "web-01.example.internal.evil",
        "WEB-01.example.internal",
    ):
        answer = world.enroll(issued.secret, name)
        assert answer.status_code == 422, name
        assert answer.json()["detail"]["code"] == "agent_name_not_allowed"
        assert "web-*.example.internal" in answer.json()["detail"]["message"]
    assert world.footprint() == before
    assert world.enroll(issued.secret, "web-01.example.internal").status_code == 201


def test_a_name_the_organisation_has_is_refused_and_the_use_is_not_spent(
    world: Enrollment,
) -> None:
    issued = world.token(uses=2)
    assert world.enroll(issued.secret, "web-01").status_code == 201
    before = world.footprint()
    taken = world.enroll(issued.secret, "web-01")
    assert taken.status_code == 409
    assert taken.json()["detail"]["code"] == "agent_exists"
    assert world.footprint() == before
    assert world.enroll(issued.secret, "web-02").status_code == 201


def test_a_malformed_name_is_the_usual_invalid_request(world: Enrollment) -> None:
    issued = world.token()
    before = world.footprint()
    # ESC and CSI (C1's U+009B) would be obeyed by the terminal that lists the agent.
    for name in ("", "   ", "web\n01", "web\x1b[2J01", "web\x9b2J01", "web\x7f", "x" * 201):
        answer = world.enroll(issued.secret, name)
        assert answer.status_code == 422, name
        assert answer.json()["detail"]["code"] == "invalid_request"
    assert world.footprint() == before


def test_the_trail_names_the_token_and_never_its_secret(world: Enrollment) -> None:
    issued = world.token(uses=2, label="web servers")
    enrolled = world.enroll(issued.secret, "web-01").json()
    world.enroll(issued.secret, "web-01")  # taken: refused
    (used,) = world.events("enrollment_token.used")
    (refused,) = world.events("enrollment_token.refused")
    (created,) = world.events("enrollment_token.created")
    for event in (used, refused, created):
        assert str(event["org_id"]) == world.org.org_id
        assert event["data"]["token_id"] == str(issued.token.id)
        assert issued.secret not in str(event)
    assert used["data"]["agent_id"] == enrolled["agent_id"]
    assert used["actor_name"] == f"enrollment-token:{issued.token.id}"
    assert refused["data"]["reason"] == "agent_exists"
    assert created["actor_name"] == "cli:tests"
    with world.pool.connection() as conn:
        stored = conn.execute("SELECT * FROM enrollment_tokens").fetchone()
    assert stored is not None
    assert issued.secret not in str(dict(stored))


def test_a_body_that_cannot_be_read_is_described_only_to_a_live_token(
    world: Enrollment,
) -> None:
    """Without a token that exists (a revoked one included), the answer is the 401: the body's
    rules are for hosts that hold a token."""
    issued = world.token()
    revoked = world.token()
    world.services.enrollment.revoke(
        revoked.token.id, org_id=None, now=world.clock.now(), actor=OPERATOR
    )
    json = {"content-type": "application/json"}
    with world.api.client(issued.secret) as host:
        described = host.post(ENROLL_PATH, content=b"{not json", headers=json)
    with world.api.client(revoked.secret) as host:
        refused = host.post(ENROLL_PATH, content=b"{not json", headers=json)
    assert described.status_code == 422
    assert described.json()["detail"]["code"] == "invalid_request"
    assert refused.status_code == 401
    assert refused.json()["detail"]["code"] == "enrollment_token_refused"


BIDI_NAME = "web\u202e10-bew"


def test_a_name_is_judged_only_for_a_token_that_could_be_used(world: Enrollment) -> None:
    """The credential before the body: a name with a bidirectional control (which the contract's
    pattern does not state) is a 422 only for a token that is known, unexpired and has a use
    left; to an unknown, used-up or expired one it is the 401 that token earns."""
    before = world.footprint()
    unknown = world.enroll("nwe_" + "x" * 40, BIDI_NAME)
    assert unknown.status_code == 401, unknown.text
    assert unknown.json()["detail"]["code"] == "enrollment_token_refused"
    assert world.footprint() == before

    used_up = world.token()
    assert world.enroll(used_up.secret, "web-01").status_code == 201
    before = world.footprint()
    answer = world.enroll(used_up.secret, BIDI_NAME)
    assert answer.status_code == 401, answer.text
    assert answer.json()["detail"]["code"] == "enrollment_token_used_up"
    expired = world.token(uses=5)
    world.later(hours=24)
    before = world.footprint()
    answer = world.enroll(expired.secret, BIDI_NAME)
    assert answer.status_code == 401, answer.text
    assert answer.json()["detail"]["code"] == "enrollment_token_expired"
    refused = world.events("enrollment_token.refused")
    assert [event["data"]["name"] for event in refused] == ["web\ufffd10-bew"] * 2
    assert world.footprint() == before

    good = world.token()
    before = world.footprint()
    answer = world.enroll(good.secret, BIDI_NAME)
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"]["message"].startswith("name: "), answer.text
    assert "U+202E" in answer.json()["detail"]["message"]
    assert world.footprint() == before
    assert len(world.events("enrollment_token.refused")) == 2
