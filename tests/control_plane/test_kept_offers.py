"""The kept offers (`agent_offers`) are what computing every offer afresh answers, after each
kind of write that can change one; and what an agent runs is its newest report's version.

The fleet is `test_fleet_offers`'s varied one. After each write the fleet's views read from the
kept offers must equal `release_views` over freshly read facts, agent by agent, for the whole
fleet and for each organisation's list; a write the triggers missed leaves a stale offer and
fails here.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from psycopg.rows import dict_row

import control_plane.rollout.kept_offers as kept_module
from control_plane.forecast.releases import _needs
from control_plane.registry import Services
from control_plane.rollout.kept_offers import refresh
from control_plane.rollout.offer import offers_from, read_fleet_facts
from control_plane.rollout.services import (
    agent_release,
    kept_release_views,
    release_views,
    rollout_overview,
)
from control_plane.runs.outcomes import Outcome, record_outcome
from control_plane.types import Pool
from tests.control_plane.test_fleet_offers import (
    BETA,
    BETA_ARM,
    OPERATOR,
    STABLE,
    Fleet,
    _publish,
    _varied_fleet,
)
from tests.worlds.clocks import ManualClock


@pytest.fixture
def fleet(
    services: Services, pool: Pool, release_key: Ed25519PrivateKey, clock: ManualClock
) -> Fleet:
    return _varied_fleet(services, pool, release_key, clock.now())


def _assert_kept_is_fresh(pool: Pool, fleet: Fleet, now: datetime) -> None:
    with pool.connection() as conn:
        kept = kept_release_views(conn, now)
        fresh = release_views(conn, read_fleet_facts(conn), now)
        assert sorted(kept, key=lambda v: v.agent_id.int) == sorted(
            fresh, key=lambda v: v.agent_id.int
        )
        enabled = {
            row["id"]
            for row in conn.execute(
                "SELECT id FROM agents WHERE deleted_at IS NULL AND update_schedule_enabled"
            ).fetchall()
        }
        counted = rollout_overview(conn, now)
        for pair in counted.pairs:
            on_pair = [
                v
                for v in fresh
                if v.track_seen
                and (v.track.channel, v.track.platform) == (pair.channel, pair.platform)
            ]
            moving = [v for v in on_pair if not v.up_to_date and v.hold is None]
            assert pair.agents == len(on_pair)
            assert pair.pinned == sum(v.pinned for v in on_pair)
            assert pair.up_to_date == sum(v.up_to_date for v in on_pair)
            assert pair.held == sum(v.hold is not None and not v.up_to_date for v in on_pair)
            assert pair.updating_at_this_stage == sum(
                v.offered is not None
                and v.offered.release_id == pair.release_id
                and v.agent_id in enabled
                and not pair.halted
                for v in moving
            )
            assert pair.waiting_for_everyone == (
                0
                if pair.stage != "canary"
                else sum(
                    (v.offered is None or v.offered.release_id != pair.release_id)
                    and (v.basis == "previous" or v.offered is not None)
                    for v in moving
                )
            )
        for org in fleet.orgs:
            listed = kept_release_views(conn, now, org_id=org)
            names = conn.execute(
                "SELECT id FROM agents WHERE org_id = %s AND deleted_at IS NULL ORDER BY name, id",
                [org],
            ).fetchall()
            assert [v.agent_id for v in listed] == [row["id"] for row in names]
            for view in listed:
                assert view == agent_release(conn, view.agent_id, org, now)


def _release(pool: Pool, channel: str, platform: str, version: str) -> UUID:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT id FROM releases WHERE channel = %s AND platform = %s AND agent_version = %s",
            [channel, platform, version],
        ).fetchone()
    assert row is not None
    release_id: UUID = row["id"]
    return release_id


def _live(fleet: Fleet) -> list[tuple[UUID, UUID]]:
    return [(a, o) for a, o in fleet.agents if a != fleet.deleted]


Write = Callable[[Services, Pool, Fleet, Ed25519PrivateKey, ManualClock], None]


def _pin_agent(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    agent = _live(f)[4][0]
    s.pins.pin(agent_id=agent, version="1.0.0", reason="t", actor=OPERATOR, now=c.now())


def _pin_org(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    s.pins.pin(org_id=f.orgs[4], version=None, reason="t", actor=OPERATOR, now=c.now())


def _unpin_org(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    s.pins.unpin(org_id=f.orgs[1], actor=OPERATOR, now=c.now())


def _mark_agent(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    for agent, _ in _live(f)[:10]:
        s.rollout.mark_canary(agent, canary=True, actor=OPERATOR, now=c.now())


def _mark_org(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    s.rollout.mark_canary_org(f.orgs[0], canary=True, actor=OPERATOR, now=c.now())
    s.rollout.mark_canary_org(f.orgs[3], canary=False, actor=OPERATOR, now=c.now())


def _publish_canary(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    _publish(s, k, c.now(), BETA, "1.4.0", 20, "canary")


def _publish_new_pair(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    _publish(s, k, c.now(), BETA_ARM, "1.0.0", 21, "everyone")


def _promote(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    canary = _release(p, STABLE.channel, STABLE.platform, "1.2.0")
    s.rollout.promote(canary, reason="t", actor=OPERATOR, now=c.now(), to_wave=3)


def _withdraw(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    older = _release(p, STABLE.channel, STABLE.platform, "1.1.0")
    s.releases.withdraw(older, reason="t", now=c.now())


def _waves(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    s.rollout.update_settings(
        {"waves": [{"share_percent": 50, "canaries": True}, {"share_percent": 100}]},
        actor=OPERATOR,
        now=c.now(),
    )


def _reports(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    with p.connection() as conn:
        for agent, _ in _live(f)[::7]:
            conn.execute("UPDATE agents SET current_version = '1.1.0' WHERE id = %s", [agent])


def _new_pair_seen(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    with p.connection() as conn:
        for agent, _ in _live(f)[::5]:
            conn.execute(
                "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
                " VALUES (%s, 'beta', 'linux-x86_64', %s) ON CONFLICT (agent_id) DO UPDATE"
                " SET channel = EXCLUDED.channel, platform = EXCLUDED.platform",
                [agent, c.now()],
            )


def _enrol_and_remove(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    s.accounts.enroll_agent(f.orgs[1], "host-new", now=c.now())
    s.accounts.delete_agent(_live(f)[2][0], now=c.now(), actor=OPERATOR)


def _holds_end(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    # Nothing is written: the time passes the end of every hold.
    c.set(c.now() + timedelta(days=4))


def _halt_and_brake(s: Services, p: Pool, f: Fleet, k: Ed25519PrivateKey, c: ManualClock) -> None:
    canary = _release(p, STABLE.channel, STABLE.platform, "1.2.0")
    s.rollout.halt(canary, reason="t", actor=OPERATOR, now=c.now())
    braked = _release(p, BETA.channel, BETA.platform, "1.3.0")
    s.brake.set_release(braked, engaged=False, reason="t", actor=OPERATOR, now=c.now())


WRITES: dict[str, Write] = {
    "pin_agent": _pin_agent,
    "pin_org": _pin_org,
    "unpin_org": _unpin_org,
    "mark_agents": _mark_agent,
    "mark_orgs": _mark_org,
    "publish_canary": _publish_canary,
    "publish_on_a_new_pair": _publish_new_pair,
    "promote": _promote,
    "withdraw": _withdraw,
    "plan_of_waves": _waves,
    "reported_versions": _reports,
    "pair_seen": _new_pair_seen,
    "enrol_and_remove": _enrol_and_remove,
    "holds_end": _holds_end,
    "halt_and_brake": _halt_and_brake,
}


@pytest.mark.parametrize("write", list(WRITES))
def test_the_kept_offers_follow_each_write(
    write: str,
    fleet: Fleet,
    services: Services,
    pool: Pool,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
) -> None:
    _assert_kept_is_fresh(pool, fleet, clock.now())
    with pool.connection() as conn:
        assert refresh(conn) == 0, "a read leaves nothing stale"
    WRITES[write](services, pool, fleet, release_key, clock)
    _assert_kept_is_fresh(pool, fleet, clock.now())


def test_a_write_marks_only_the_agents_it_affects(
    fleet: Fleet,
    services: Services,
    pool: Pool,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
) -> None:
    """An agent's pin recomputes that agent; an organisation's pin that organisation's agents;
    the poll's sighting and an unchanged version recompute nobody."""
    with pool.connection() as conn:
        refresh(conn)
        live = _live(fleet)
        _pin_agent(services, pool, fleet, release_key, clock)
        assert refresh(conn) == 1
        org = fleet.orgs[4]
        services.pins.pin(org_id=org, version="1.1.0", reason="t", actor=OPERATOR, now=clock.now())
        assert refresh(conn) == sum(1 for _, owner in live if owner == org)
        agent = live[0][0]
        conn.execute(
            "UPDATE agents SET last_seen_at = %s, current_version = current_version WHERE id = %s",
            [clock.now(), agent],
        )
        conn.execute(
            "UPDATE agent_tracks SET seen_at = %s WHERE agent_id = %s", [clock.now(), agent]
        )
        assert refresh(conn) == 0


def test_a_late_report_of_an_older_run_leaves_the_version_alone(
    fleet: Fleet, pool: Pool, clock: ManualClock
) -> None:
    """Two runs of one agent: the newer reports 1.2.0, then the older one's report arrives
    (1.1.0). The agent runs 1.2.0: its version, its offer's `running` and whether it is up to
    date all say so. The same reports in order move it."""
    now = clock.now()
    agent, org = _live(fleet)[10]

    def claimed(at: datetime) -> UUID:
        with pool.connection() as conn:
            row = conn.execute(
                "INSERT INTO runs (agent_id, org_id, trigger, status, created_at)"
                " VALUES (%s, %s, 'manual', 'claimed', %s) RETURNING id",
                [agent, org, at],
            ).fetchone()
        assert row is not None
        run_id: UUID = row["id"]
        return run_id

    def report(run_id: UUID, version: str) -> None:
        failed = Outcome(status="failed", version=version, error="t", reason=None, switched_at=None)
        with pool.connection() as conn, conn.transaction():
            assert record_outcome(conn, agent, run_id, failed, now) is None

    def running() -> str | None:
        with pool.connection() as conn:
            row = conn.execute("SELECT current_version FROM agents WHERE id = %s", [agent])
            version = row.fetchone()
            kept = {v.agent_id: v for v in kept_release_views(conn, now)}[agent]
            alone = agent_release(conn, agent, org, now)
        assert version is not None
        assert kept.running_version == alone.running_version == version["current_version"]
        assert kept == alone
        result: str | None = version["current_version"]
        return result

    older = claimed(now - timedelta(hours=2))
    newer = claimed(now - timedelta(hours=1))
    report(newer, "1.2.0")
    report(older, "1.1.0")
    assert running() == "1.2.0"

    earlier = claimed(now - timedelta(minutes=30))
    later = claimed(now - timedelta(minutes=10))
    report(earlier, "1.0.0")
    assert running() == "1.0.0"
    report(later, "1.3.0")
    assert running() == "1.3.0"


def _needs_of_views(pool: Pool, now: datetime, slot_at: datetime) -> Counter[tuple[object, ...]]:
    """The forecast's need of every scheduled agent, from fresh views: the rule written out
    agent by agent (the oracle of the SQL that counts them)."""
    with pool.connection() as conn:
        views = {v.agent_id: v for v in release_views(conn, read_fleet_facts(conn), now)}
        current = {
            (row["channel"], row["platform"]): row
            for row in conn.execute(
                "SELECT cur.channel, cur.platform, rel.id, rel.agent_version"
                " FROM current_releases cur JOIN releases rel ON rel.id = cur.release_id"
            ).fetchall()
        }
        agents = conn.execute(
            "SELECT id, org_id FROM agents WHERE deleted_at IS NULL AND update_schedule_enabled"
            " AND jsonb_array_length(update_schedule_times) > 0"
        ).fetchall()
    needs: Counter[tuple[object, ...]] = Counter()
    for agent in agents:
        view = views[agent["id"]]
        release = current.get((view.track.channel, view.track.platform))
        if release is None or view.hold is not None:
            continue
        runs_it = view.running_version == release["agent_version"]
        offered = view.offered
        takes = (
            offered is not None
            and not (offered.halted or offered.braked)
            and offered.version != view.running_version
        )
        needs[
            (
                agent["org_id"],
                slot_at,
                None if runs_it or view.pinned else view.wave,
                None if runs_it or view.pinned else release["id"],
                offered.release_id if offered is not None and takes else None,
            )
        ] += 1
    return needs


@pytest.mark.parametrize("write", ["none", "promote", "halt_and_brake", "reported_versions"])
def test_the_forecasts_needs_are_the_agents_views(
    write: str,
    fleet: Fleet,
    services: Services,
    pool: Pool,
    release_key: Ed25519PrivateKey,
    clock: ManualClock,
) -> None:
    if write != "none":
        WRITES[write](services, pool, fleet, release_key, clock)
    now = clock.now()
    slot_at = now + timedelta(hours=3)
    with pool.connection() as conn:
        counted: Counter[tuple[object, ...]] = Counter()
        for need in _needs(conn, lambda times: slot_at, now):
            counted[
                (need.org_id, need.slot_at, need.first_wave, need.at_everyone, need.tonight)
            ] += need.agents
    assert counted == _needs_of_views(pool, now, slot_at)
    assert sum(counted.values()) > 50


def test_the_reconcile_step_recomputes_what_a_promotion_made_stale(
    fleet: Fleet, services: Services, pool: Pool, clock: ManualClock
) -> None:
    """A wave opens when the reconcile step promotes the release (a write): the same step
    recomputes the kept offers, so the next reader finds nothing stale."""
    canary = _release(pool, STABLE.channel, STABLE.platform, "1.2.0")
    agent, org = _live(fleet)[0]
    clock.set(clock.now() + timedelta(hours=1))
    with pool.connection() as conn:
        # The wave's first success starts its soak.
        conn.execute(
            "INSERT INTO runs (agent_id, org_id, trigger, status, release_id, version,"
            " created_at, finished_at) VALUES (%s, %s, 'manual', 'succeeded', %s, '1.2.0', %s, %s)",
            [agent, org, canary, clock.now(), clock.now()],
        )
        refresh(conn)
    clock.set(clock.now() + timedelta(days=3))
    step = services.rollout.advance(clock.now())
    assert step.promotions
    with pool.connection() as conn:
        assert refresh(conn) == 0
    _assert_kept_is_fresh(pool, fleet, clock.now())


def _someone_waits_on_a_lock(pool: Pool) -> bool:
    with pool.connection() as conn:
        row = conn.execute(
            "SELECT count(*) AS waiting FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and row["waiting"] > 0


@pytest.mark.parametrize("marked_before", [True, False], ids=["marked", "unmarked"])
def test_a_write_racing_a_refresh_is_computed_again(
    marked_before: bool,
    fleet: Fleet,
    services: Services,
    pool: Pool,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pin that lands while a refresh computes, after the refresh read the facts it computes
    from: the agent stays marked, so the next refresh computes it again and the kept offer shows
    the pin. The pin commits at once — also when the refresh was computing that same agent
    (whose mark the refresh would otherwise hold until it committed, past a request's lock bound)
    — and its mark is not taken by the refresh. (A refresh that took the marks after computing
    would drop the pin's mark and keep the offer from before the pin for good.)"""
    live = _live(fleet)
    agent = live[4][0]
    other = live[5][0]
    now = clock.now()
    with pool.connection() as conn:
        refresh(conn)
        conn.execute(
            "INSERT INTO agent_offers_stale (agent_id) VALUES (%s)",
            [agent if marked_before else other],
        )
    pinned = threading.Event()

    def pin() -> None:
        services.pins.pin(agent_id=agent, version="1.0.0", reason="t", actor=OPERATOR, now=now)
        pinned.set()

    writer = threading.Thread(target=pin)
    real_offers_from = offers_from

    def offers_from_after_a_pin(*args: Any, **kwargs: Any) -> Any:
        writer.start()
        deadline = time.monotonic() + 30
        while not pinned.is_set():
            assert not _someone_waits_on_a_lock(pool), "the pin waits for the refresh"
            assert time.monotonic() < deadline, "the pin did not commit"
            time.sleep(0.02)
        return real_offers_from(*args, **kwargs)

    monkeypatch.setattr(kept_module, "offers_from", offers_from_after_a_pin)
    with pool.connection() as conn:
        assert refresh(conn) == 1
    monkeypatch.undo()
    writer.join(30)
    assert pinned.is_set()
    with pool.connection() as conn:
        marked = conn.execute("SELECT DISTINCT agent_id FROM agent_offer_marks").fetchall()
    assert [row["agent_id"] for row in marked] == [agent]
    _assert_kept_is_fresh(pool, fleet, now)
    with pool.connection() as conn:
        assert {v.agent_id: v for v in kept_release_views(conn, now)}[agent].pinned


_A_RELEASE = (
    "INSERT INTO releases (manifest_version, agent_version, channel, platform, issued_at,"
    " expires, length, sha256, key_id, manifest, signature, published_at, stage)"
    " VALUES (2, '1.6.0', 'stable', 'linux-x86_64', now(), now() + interval '30 days', 1,"
    " repeat('a', 64), 'k', '\\x00', '\\x00', now(), 'everyone') RETURNING id"
)


def test_a_write_that_found_its_agent_marked_and_commits_after_a_refresh_is_computed_again(
    database_url: str,
) -> None:
    """The agent is marked (just enrolled); a publish marks everyone while a refresh takes that
    mark and reads the facts before the publish commits. The publish's own mark is left for the
    next refresh, which offers the agent the release. (With one mark per agent, the publish found
    the agent marked, added nothing, and the kept offer stayed "nothing offered" for good.)"""
    with psycopg.connect(database_url, autocommit=True) as setup:
        org = setup.execute("INSERT INTO orgs (name) VALUES ('Acme') RETURNING id").fetchone()
        assert org is not None
        agent = setup.execute(
            "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id", [org[0]]
        ).fetchone()
        assert agent is not None
    with (
        psycopg.connect(database_url) as writer,
        psycopg.connect(database_url, autocommit=True, row_factory=dict_row) as reader,
    ):
        release = writer.execute(_A_RELEASE).fetchone()
        assert release is not None
        writer.execute(
            "INSERT INTO current_releases (channel, platform, release_id, changed_at)"
            " VALUES ('stable', 'linux-x86_64', %s, now())",
            [release[0]],
        )
        assert refresh(reader) == 1  # the enrolment's mark, computed before the publish commits
        writer.commit()
        assert refresh(reader) == 1
        kept = reader.execute(
            "SELECT release_id FROM agent_offers WHERE agent_id = %s", [agent[0]]
        ).fetchone()
    assert kept == {"release_id": release[0]}
