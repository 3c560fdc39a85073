"""`after_restore`: every token outstanding in a restored database is revoked, once, on the
trail; the answers' change feed starts empty; an agent holding such a token gets no permit."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from uuid import UUID

from control_plane.events.trail import Actor
from control_plane.restore import after_restore
from control_plane.types import Pool
from tests.conftest import RunningControlPlane
from tests.control_plane.conftest import Api, SignedRelease
from tests.control_plane.reconcile_fleet import NIGHT, NIGHT_KEY
from tests.control_plane.test_cli import run_control
from tests.worlds.clocks import ManualClock

OPERATOR = Actor(kind="operator", name="cli:tests")


def _claimed_run(pool: Pool, agent_id: str, org_id: str, *, expires_in: timedelta) -> UUID:
    with pool.connection() as conn:
        release = conn.execute("SELECT id FROM releases").fetchone()
        assert release is not None
        run = conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, release_id,"
            " from_version, created_at, claimed_at) VALUES (%s, %s, 'schedule', %s, %s,"
            " 'claimed', %s, '1.4.1', %s, %s) RETURNING id",
            [agent_id, org_id, NIGHT_KEY, NIGHT, release["id"], NIGHT, NIGHT],
        ).fetchone()
        assert run is not None
        conn.execute(
            "INSERT INTO tokens (run_id, agent_id, release_id, granted_at, expires_at)"
            " VALUES (%s, %s, %s, %s, %s)",
            [run["id"], agent_id, release["id"], NIGHT, NIGHT + expires_in],
        )
    run_id: UUID = run["id"]
    return run_id


def test_every_outstanding_token_is_revoked_once_and_its_agent_gets_no_permit(
    pool: Pool,
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org,
    make_agent,
) -> None:
    org = make_org("Acme")
    holder, late = make_agent(org, "web-01"), make_agent(org, "web-02")
    clock.set(NIGHT + timedelta(minutes=2))
    outstanding = _claimed_run(pool, holder.agent_id, org.org_id, expires_in=timedelta(hours=1))
    _claimed_run(pool, late.agent_id, org.org_id, expires_in=timedelta(minutes=1))  # expired

    done = after_restore(pool, now=clock.now(), actor=OPERATOR)
    assert done.tokens_revoked == 1
    assert after_restore(pool, now=clock.now(), actor=OPERATOR).tokens_revoked == 0

    with api.client(holder.agent_key) as client:
        refused = client.post(f"/v1/agent/runs/{outstanding}/confirm")
    assert refused.status_code == 403
    assert refused.json()["detail"]["code"] == "token_revoked"
    assert "(restore)" in refused.json()["detail"]["message"]
    with pool.connection() as conn:
        trail = conn.execute(
            "SELECT actor_name, data FROM events WHERE kind = 'platform.restored' ORDER BY id"
        ).fetchall()
    assert [(row["actor_name"], row["data"]["revoked_tokens"]) for row in trail] == [
        ("cli:tests", 1),
        ("cli:tests", 0),
    ]


def test_the_change_feed_keeps_only_the_revocation(
    pool: Pool, clock: ManualClock, published: SignedRelease, make_org, make_agent
) -> None:
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    clock.set(NIGHT + timedelta(minutes=2))
    _claimed_run(pool, agent.agent_id, org.org_id, expires_in=timedelta(hours=1))
    with pool.connection() as conn:
        before = conn.execute("SELECT count(*) AS n FROM answer_changes").fetchone()
    assert before is not None and before["n"] > 0
    after_restore(pool, now=clock.now(), actor=OPERATOR)
    with pool.connection() as conn:
        left = conn.execute("SELECT DISTINCT xid::text AS xid FROM answer_changes").fetchall()
        revocation = conn.execute(
            "SELECT xmin::text AS xid FROM tokens WHERE revoked_reason = 'restore'"
        ).fetchone()
    # The old server's rows are gone; the revocation's own rows tell the replicas what changed.
    assert revocation is not None
    assert [row["xid"] for row in left] == [revocation["xid"]]


def test_a_replica_whose_clock_is_behind_the_revoking_host_still_gives_no_permit(
    pool: Pool,
    api: Api,
    clock: ManualClock,
    published: SignedRelease,
    make_org,
    make_agent,
) -> None:
    # The host that ran after-restore (or engaged the brake) stamps the revocation with its own
    # clock; a replica 30 s behind it sees a revocation "in its future". A permit asked now is a
    # question about now: a recorded revocation is in force whatever its stamp says.
    org = make_org("Acme")
    holder = make_agent(org, "web-01")
    clock.set(NIGHT + timedelta(minutes=2))
    outstanding = _claimed_run(pool, holder.agent_id, org.org_id, expires_in=timedelta(hours=1))
    after_restore(pool, now=clock.now() + timedelta(seconds=30), actor=OPERATOR)

    with api.client(holder.agent_key) as client:
        refused = client.post(f"/v1/agent/runs/{outstanding}/confirm")
    assert refused.status_code == 403
    assert refused.json()["detail"]["code"] == "token_revoked"
    with pool.connection() as conn:
        run = conn.execute("SELECT status FROM runs WHERE id = %s", [outstanding]).fetchone()
    assert run is not None and run["status"] == "claimed"


def test_after_restore_refuses_while_a_serving_replica_is_connected(
    pool: Pool,
    database_url: str,
    control_plane_server: Callable[..., RunningControlPlane],
    clock: ManualClock,
    published: SignedRelease,
    make_org,
    make_agent,
) -> None:
    # Run on the live database by mistake (the wrong terminal at night), after-restore would
    # revoke the grants of agents that replica is serving now. It refuses, and changes nothing.
    org = make_org("Acme")
    agent = make_agent(org, "web-01")
    clock.set(NIGHT + timedelta(minutes=2))
    # The command runs on the host's own clock: a grant that is still outstanding then.
    _claimed_run(pool, agent.agent_id, org.org_id, expires_in=timedelta(days=3650))
    replica = control_plane_server()

    def state() -> tuple[int, set[int], int]:
        """Outstanding tokens, the feed's rows (the replica adds its own), restores on the trail."""
        with pool.connection() as conn:
            tokens = conn.execute(
                "SELECT count(*) AS n FROM tokens WHERE revoked_at IS NULL"
            ).fetchone()
            feed = conn.execute("SELECT id FROM answer_changes").fetchall()
            trail = conn.execute(
                "SELECT count(*) AS n FROM events WHERE kind = 'platform.restored'"
            ).fetchone()
        assert tokens is not None and trail is not None
        return tokens["n"], {row["id"] for row in feed}, trail["n"]

    tokens, feed, restores = state()
    assert tokens == 1 and feed and restores == 0
    refused = run_control("after-restore", "--database-url", database_url)
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    message = refused.stderr.strip().splitlines()[-1]
    assert "nachtwacht control serve" in message
    assert "session(s)" in message and "local socket" in message
    assert "Stop every replica first" in message
    assert "--even-with-replicas-connected" in message
    assert "nothing was changed" in message
    tokens_after, feed_after, restores_after = state()
    assert (tokens_after, restores_after) == (1, 0)
    assert feed <= feed_after

    # The operator who knows the sessions are not serving agents says so.
    done = run_control(
        "after-restore", "--database-url", database_url, "--even-with-replicas-connected", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["tokens_revoked"] == 1
    assert replica.stop() == 0

    # Once the replica is stopped, no flag is needed.
    again = run_control("after-restore", "--database-url", database_url)
    assert again.returncode == 0, again.stderr
