"""An update now goes through the caps: the bulk "Update now" for a whole organisation is
granted `org_cap` a round like a scheduled night, over real HTTP against a real PostgreSQL.

A refused claim writes nothing; an operator's forced update and an agent older than the
contract that waits for a full round are granted outside the caps, as before.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import httpx

from control_plane.claims.manual import CAPPED_MANUAL_CONTRACT
from ground.contract import CONTRACT_VERSION_HEADER
from tests.control_plane.api.conftest import Rollout, TwoReleases
from tests.control_plane.conftest import Agent, Org

# An afternoon: no scheduled slot anywhere near, so every grant is a manual one.
AFTERNOON = datetime(2026, 11, 30, 14, 7, 10, tzinfo=UTC)
# Every table a claim may write, as the test compares them before and after a refusal.
WRITTEN = (
    "runs",
    "tokens",
    "events",
    "claim_rounds_org",
    "claim_rounds_global",
    "claim_refusals",
    "forced_updates",
)


def _claim(rollout: Rollout, agent: Agent, run_id: str, contract: int | None) -> httpx.Response:
    headers = {} if contract is None else {CONTRACT_VERSION_HEADER: str(contract)}
    with rollout.api.client(agent.agent_key) as client:
        return client.post("/v1/agent/claims", json={"manual_run_id": run_id}, headers=headers)


def _fleet(rollout: Rollout, size: int, org_cap: int) -> tuple[Org, dict[str, Agent]]:
    """An organisation of `size` agents, all asked to update now at once (the bulk path),
    under an organisation cap of `org_cap`: each agent's pending run's id → the agent."""
    answer = rollout.operator("PUT", "/v1/admin/settings", org_cap=org_cap)
    assert answer.status_code == 200, answer.text
    org = rollout.make_org()
    agents = [rollout.make_agent(org, f"web-{n:02}") for n in range(size)]
    rollout.clock.set(AFTERNOON)
    asked = rollout.services.runs.request_manual_updates(
        UUID(org.org_id), [UUID(agent.agent_id) for agent in agents], None, now=AFTERNOON
    )
    assert (asked.requested, asked.pending) == (size, 0)
    by_agent = {agent.agent_id: agent for agent in agents}
    with rollout.pool.connection() as conn:
        rows = conn.execute(
            "SELECT id, agent_id FROM runs WHERE org_id = %s AND trigger = 'manual'", [org.org_id]
        ).fetchall()
    return org, {str(row["id"]): by_agent[str(row["agent_id"])] for row in rows}


def _tokens_per_round(rollout: Rollout, org: Org) -> Counter[datetime | None]:
    """The organisation's tokens by the round they were counted in (None: not counted)."""
    with rollout.pool.connection() as conn:
        rows = conn.execute(
            "SELECT t.round_start, date_trunc('minute', t.granted_at) AS granted_minute"
            " FROM tokens t JOIN runs r ON r.id = t.run_id WHERE r.org_id = %s",
            [org.org_id],
        ).fetchall()
    return Counter(row["round_start"] for row in rows)


def _tables(rollout: Rollout) -> dict[str, list[tuple[Any, ...]]]:
    with rollout.pool.connection() as conn:
        return {
            table: sorted(
                (
                    tuple(str(value) for value in row.values())
                    for row in conn.execute(
                        f"SELECT * FROM {table}"  # noqa: S608 - the test's own table names
                    ).fetchall()
                ),
            )
            for table in WRITTEN
        }


def test_a_bulk_update_now_is_granted_org_cap_a_round_until_every_agent_has_its_token(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org, pending = _fleet(rollout, size=7, org_cap=3)
    rounds = 0
    while pending:
        rounds += 1
        for run_id, agent in list(pending.items()):
            answer = _claim(rollout, agent, run_id, CAPPED_MANUAL_CONTRACT)
            if answer.status_code == 201:
                del pending[run_id]
                continue
            assert answer.status_code == 429, answer.text
            detail = answer.json()["detail"]
            assert detail["code"] == "org_cap"
            # The same hint as a scheduled claim's: the seconds to the next round.
            assert detail["retry_after_seconds"] == 50
        assert rounds <= 3, "seven agents at three a round take three rounds"
        rollout.clock.advance(minutes=1)
    assert rounds == 3
    per_round = _tokens_per_round(rollout, org)
    assert sorted(per_round.values()) == [1, 3, 3]
    assert None not in per_round
    with rollout.pool.connection() as conn:
        counted = conn.execute(
            "SELECT round_start, granted FROM claim_rounds_org WHERE org_id = %s"
            " ORDER BY round_start",
            [org.org_id],
        ).fetchall()
        started = conn.execute(
            "SELECT data FROM events WHERE kind = 'update.started' AND org_id = %s",
            [org.org_id],
        ).fetchall()
    # The grants are the round's counts: a scheduled claim of the same round sees them.
    assert [(row["round_start"], row["granted"]) for row in counted] == sorted(per_round.items())
    assert len(started) == 7
    assert all(row["data"]["through_caps"] for row in started)


def test_manual_claims_racing_for_one_round_never_pass_its_cap(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    org, pending = _fleet(rollout, size=8, org_cap=2)
    answers: dict[str, int] = {}
    start = threading.Barrier(len(pending))

    def claim(run_id: str, agent: Agent) -> None:
        start.wait()
        answers[run_id] = _claim(rollout, agent, run_id, CAPPED_MANUAL_CONTRACT).status_code

    threads = [
        threading.Thread(target=claim, args=(run_id, agent)) for run_id, agent in pending.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers.values()) == [201, 201] + [429] * 6
    assert list(_tokens_per_round(rollout, org).values()) == [2]


def test_a_manual_claim_refused_by_a_cap_writes_nothing(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    _, pending = _fleet(rollout, size=2, org_cap=1)
    (first, first_agent), (second, second_agent) = pending.items()
    assert _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT).status_code == 201
    before = _tables(rollout)
    refused = _claim(rollout, second_agent, second, CAPPED_MANUAL_CONTRACT)
    assert refused.status_code == 429
    assert refused.json()["detail"]["code"] == "org_cap"
    rollout.services.refusals.flush()
    assert _tables(rollout) == before
    # Counted for the metrics like any refusal, in memory only.
    assert rollout.services.refusals.refused_counts() == {"org_cap": 1}
    with rollout.pool.connection() as conn:
        still = conn.execute("SELECT status FROM runs WHERE id = %s", [second]).fetchone()
    assert still is not None and still["status"] == "requested"


def test_a_claim_found_full_only_by_its_count_writes_nothing(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    # The round fills between the early read and the grant's count (another replica's grant):
    # the count refuses, and the grant's transaction takes back all it wrote.
    _, pending = _fleet(rollout, size=1, org_cap=1)
    ((run_id, agent),) = pending.items()
    with rollout.pool.connection() as conn:
        conn.execute(
            "CREATE FUNCTION fill_round() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN UPDATE claim_rounds_org SET granted = 1 WHERE org_id = NEW.org_id;"
            " RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER fill_round AFTER UPDATE OF status ON runs"
            " FOR EACH ROW WHEN (NEW.status = 'claimed') EXECUTE FUNCTION fill_round()"
        )
    try:
        before = _tables(rollout)
        refused = _claim(rollout, agent, run_id, CAPPED_MANUAL_CONTRACT)
        assert refused.status_code == 429, refused.text
        assert refused.json()["detail"]["code"] == "org_cap"
        assert _tables(rollout) == before
    finally:
        with rollout.pool.connection() as conn:
            conn.execute("DROP TRIGGER fill_round ON runs")
            conn.execute("DROP FUNCTION fill_round()")


def test_a_refusal_by_a_cap_takes_no_lock_on_the_run(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    # Two thousand agents ask again every minute while the round is full: their refusals are
    # one read, like a scheduled claim's, never a transaction that locks their runs.
    _, pending = _fleet(rollout, size=2, org_cap=1)
    (first, first_agent), (second, second_agent) = pending.items()
    assert _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT).status_code == 201
    with rollout.pool.connection() as conn, conn.transaction():
        conn.execute("SELECT FROM runs WHERE id = %s FOR UPDATE", [second])
        headers = {CONTRACT_VERSION_HEADER: str(CAPPED_MANUAL_CONTRACT)}
        # Far longer than a refusal takes; a claim that waited for the lock would never end.
        with httpx.Client(
            base_url=rollout.api.base_url,
            headers={"Authorization": f"Bearer {second_agent.agent_key}", **headers},
            timeout=15,
        ) as client:
            refused = client.post("/v1/agent/claims", json={"manual_run_id": second})
    assert refused.status_code == 429
    assert refused.json()["detail"]["code"] == "org_cap"


def test_an_agent_before_the_capped_contract_is_granted_outside_the_caps(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    # It would end the request on a refusal and tell nobody: the run would stay requested.
    org, pending = _fleet(rollout, size=3, org_cap=1)
    (first, first_agent), *older = pending.items()
    assert _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT).status_code == 201
    (no_header, no_header_agent), (previous, previous_agent) = older
    assert _claim(rollout, no_header_agent, no_header, None).status_code == 201
    assert _claim(rollout, previous_agent, previous, CAPPED_MANUAL_CONTRACT - 1).status_code == 201
    per_round = _tokens_per_round(rollout, org)
    assert per_round == Counter({AFTERNOON.replace(second=0): 1, None: 2})
    with rollout.pool.connection() as conn:
        outside = conn.execute(
            "SELECT count(*) AS n FROM events WHERE kind = 'update.started'"
            " AND NOT (data ->> 'through_caps')::boolean"
        ).fetchone()
    assert outside is not None and outside["n"] == 2


def test_a_forced_update_is_granted_in_a_full_round(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    _, pending = _fleet(rollout, size=2, org_cap=1)
    (first, first_agent), (second, second_agent) = pending.items()
    assert _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT).status_code == 201
    assert _claim(rollout, second_agent, second, CAPPED_MANUAL_CONTRACT).status_code == 429
    forced = rollout.operator(
        "POST",
        f"/v1/admin/agents/{second_agent.agent_id}/forced-update",
        reason="the customer's support case 4711",
    )
    assert forced.status_code == 201, forced.text
    assert forced.json()["run_id"] == second
    assert _claim(rollout, second_agent, second, CAPPED_MANUAL_CONTRACT).status_code == 201


def test_the_same_manual_claim_again_keeps_its_grant_in_a_full_round(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    _, pending = _fleet(rollout, size=2, org_cap=1)
    (first, first_agent), (second, second_agent) = pending.items()
    granted = _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT)
    assert granted.status_code == 201
    assert _claim(rollout, second_agent, second, CAPPED_MANUAL_CONTRACT).status_code == 429
    again = _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT)
    assert again.status_code == 200
    assert again.json()["token"] == granted.json()["token"]


def test_a_hold_still_ends_a_manual_request_before_the_caps(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    _, pending = _fleet(rollout, size=2, org_cap=1)
    (first, first_agent), (second, second_agent) = pending.items()
    assert _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT).status_code == 201
    with rollout.api.client(second_agent.agent_key) as client:
        held = client.put(
            "/v1/agent/hold",
            json={"until": "2026-12-01T00:00:00Z", "reason": "month-end close"},
            headers={CONTRACT_VERSION_HEADER: str(CAPPED_MANUAL_CONTRACT)},
        )
    assert held.status_code == 200, held.text
    # A full round and a hold: the hold answers (409, which ends the request), not the cap.
    refused = _claim(rollout, second_agent, second, CAPPED_MANUAL_CONTRACT)
    assert refused.status_code == 409, refused.text
    assert refused.json()["detail"]["code"] == "held"


def test_the_brake_still_ends_a_manual_request_before_the_caps(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    _, pending = _fleet(rollout, size=2, org_cap=1)
    (first, first_agent), (second, second_agent) = pending.items()
    assert _claim(rollout, first_agent, first, CAPPED_MANUAL_CONTRACT).status_code == 201
    braked = rollout.operator("PUT", "/v1/admin/brake", engaged=True, reason="night freeze")
    assert braked.status_code == 200, braked.text
    refused = _claim(rollout, second_agent, second, CAPPED_MANUAL_CONTRACT)
    assert refused.status_code == 503, refused.text
    assert refused.json()["detail"]["code"] == "brake"


def test_the_platforms_cap_refuses_a_manual_claim_of_another_organisation(
    rollout: Rollout, two_releases: TwoReleases
) -> None:
    answer = rollout.operator("PUT", "/v1/admin/settings", org_cap=1, global_cap=1)
    assert answer.status_code == 200, answer.text
    _, first = _fleet(rollout, size=1, org_cap=1)
    _, second = _fleet(rollout, size=1, org_cap=1)
    ((first_run, first_agent),) = first.items()
    ((second_run, second_agent),) = second.items()
    assert _claim(rollout, first_agent, first_run, CAPPED_MANUAL_CONTRACT).status_code == 201
    refused = _claim(rollout, second_agent, second_run, CAPPED_MANUAL_CONTRACT)
    assert refused.status_code == 429, refused.text
    assert refused.json()["detail"]["code"] == "global_cap"
    assert refused.json()["detail"]["retry_after_seconds"] == 50
