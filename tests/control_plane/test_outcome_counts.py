"""The run endings `/metrics` reads are counted as they happen (migration 0013, a trigger on
`runs`), on a real PostgreSQL: each run once, when it first ends; a correction of an inferred
ending and the removal of old runs change nothing (a counter only grows); an `up_to_date` run is
the release of its agent's pair with its version; existing history is counted at the upgrade."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import psycopg
import pytest

from control_plane import migrate
from control_plane.registry import Services
from tests.worlds.clocks import ManualClock

outcome_counts = importlib.import_module(
    "control_plane.migrations.versions.rev0013_evidence_outcome_counts"
)
BEFORE = outcome_counts.down_revision

Conn = psycopg.Connection[tuple[object, ...]]

_RELEASE = (
    "INSERT INTO releases (manifest_version, agent_version, channel, platform, issued_at,"
    " expires, length, sha256, key_id, manifest, signature, published_at)"
    " VALUES (%s, %s, 'stable', 'linux-x86_64', now(), now() + interval '30 days', 1,"
    " repeat('a', 64), 'k', '\\x00', '\\x00', now()) RETURNING id"
)
_RUN = (
    "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, release_id,"
    " version, outcome_reason, miss_reason, skip_reason, created_at)"
    " VALUES (%(agent)s, %(org)s, 'schedule', %(key)s, now(), %(status)s, %(release)s,"
    " %(version)s, %(reason)s, %(miss)s, %(skip)s, now()) RETURNING id"
)


def _one(conn: Conn, sql: str, *params: object) -> object:
    row = conn.execute(sql, list(params)).fetchone()
    assert row is not None
    return row[0]


class World:
    def __init__(self, conn: Conn) -> None:
        self.conn = conn
        self.org = _one(conn, "INSERT INTO orgs (name) VALUES ('Acme') RETURNING id")
        self.agent = _one(
            conn, "INSERT INTO agents (org_id, name) VALUES (%s, 'web-01') RETURNING id", self.org
        )
        self.old = _one(conn, _RELEASE, 1, "1.5.0")
        self.new = _one(conn, _RELEASE, 2, "1.6.0")
        self._slots = iter(range(1, 1000))

    def run(
        self,
        status: str,
        *,
        release: object = None,
        version: str | None = None,
        reason: str | None = None,
        miss: str | None = None,
        skip: str | None = None,
    ) -> object:
        row = self.conn.execute(
            _RUN,
            {
                "agent": self.agent,
                "org": self.org,
                "key": f"2026-11-{next(self._slots):02d}T03:00",
                "status": status,
                "release": release,
                "version": version,
                "reason": reason,
                "miss": miss,
                "skip": skip,
            },
        ).fetchone()
        assert row is not None
        return row[0]

    def offer(self, release: object) -> None:
        """Make `release` its pair's current one, as publishing does."""
        self.conn.execute(
            "INSERT INTO current_releases (channel, platform, release_id, changed_at)"
            " VALUES ('stable', 'linux-x86_64', %s, now())"
            " ON CONFLICT (channel, platform) DO UPDATE SET release_id = EXCLUDED.release_id",
            [release],
        )

    def runs_version(self, version: str) -> None:
        self.conn.execute(
            "UPDATE agents SET current_version = %s WHERE id = %s", [version, self.agent]
        )

    def shown(self, services: Services, clock: ManualClock) -> dict[tuple[str, str, str], int]:
        """The release outcomes `/metrics` shows, those above 0."""
        return {
            (o.version, o.outcome, o.reason): o.count
            for o in services.metrics.snapshot(clock.now()).release_outcomes
            if o.count
        }

    def counts(self) -> dict[tuple[object, str, str], int]:
        rows = self.conn.execute(
            "SELECT release_id, status, reason, n FROM run_ending_counts"
        ).fetchall()
        return {(release, status, reason): n for release, status, reason, n in rows}


@pytest.fixture
def world(database_url: str) -> Iterator[World]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        yield World(conn)


def test_a_run_is_counted_once_when_it_ends(world: World) -> None:
    run = world.run("claimed", release=world.new)
    assert world.counts() == {}
    world.conn.execute(
        "UPDATE runs SET status = 'failed', outcome_reason = 'install_failed' WHERE id = %s", [run]
    )
    # The same row written again (an idempotent report) is not a second ending.
    world.conn.execute("UPDATE runs SET status = 'failed' WHERE id = %s", [run])
    assert world.counts() == {(world.new, "failed", "install_failed"): 1}


def test_a_correction_of_an_inferred_ending_is_not_counted_again(world: World) -> None:
    run = world.run("claimed", release=world.new)
    world.conn.execute(
        "UPDATE runs SET status = 'failed', outcome_reason = 'interrupted',"
        " outcome_inferred = true WHERE id = %s",
        [run],
    )
    world.conn.execute(
        "UPDATE runs SET status = 'succeeded', outcome_reason = NULL, outcome_inferred = false"
        " WHERE id = %s",
        [run],
    )
    assert world.counts() == {(world.new, "failed", "interrupted"): 1}


def test_removing_old_runs_takes_nothing_from_the_counts(world: World) -> None:
    world.run("succeeded", release=world.new)
    world.run("rolled_back", release=world.new, reason="health_check_failed")
    world.conn.execute("DELETE FROM runs")
    assert world.counts() == {
        (world.new, "succeeded", ""): 1,
        (world.new, "rolled_back", "health_check_failed"): 1,
    }


def test_up_to_date_is_counted_for_the_release_of_the_agents_pair_and_version(
    world: World,
) -> None:
    world.conn.execute(
        "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
        " VALUES (%s, 'stable', 'linux-x86_64', now())",
        [world.agent],
    )
    world.run("up_to_date", version="1.5.0")
    # A version no release of its pair has (a build of its own) is counted for no release.
    world.run("up_to_date", version="9.9.9")
    assert world.counts() == {(world.old, "up_to_date", ""): 1, (None, "up_to_date", ""): 1}


def test_in_flight_runs_are_not_endings_and_misses_keep_their_reason(world: World) -> None:
    world.run("claimed", release=world.new)
    world.run("missed", miss="throttled")
    world.run("missed", miss="throttled")
    assert world.counts() == {(None, "missed", "throttled"): 2}


def test_one_statement_inserting_many_ended_runs_counts_each_once(world: World) -> None:
    """The reconcile worker writes a night's misses in one statement: the rows it inserts are
    counted together, each by its own release, status and reason, the runs in flight not at all,
    an `up_to_date` run for its pair's release with its version."""
    world.conn.execute(
        "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
        " VALUES (%s, 'stable', 'linux-x86_64', now())",
        [world.agent],
    )
    world.run("missed", miss="throttled")
    rows = [
        ("missed", None, None, None, "offline"),
        ("missed", None, None, None, "offline"),
        ("missed", None, None, None, "throttled"),
        ("up_to_date", None, "1.5.0", None, None),
        ("up_to_date", None, "9.9.9", None, None),
        ("failed", world.new, None, "disk_full", None),
        ("claimed", world.new, None, None, None),
    ]
    world.conn.execute(
        "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, release_id,"
        " version, outcome_reason, miss_reason, created_at)"
        " SELECT %(agent)s, %(org)s, 'schedule', '2026-12-' || lpad(k::text, 2, '0') || 'T03:00',"
        " now(), status, release, version, reason, miss, now()"
        " FROM unnest(%(status)s::text[], %(release)s::uuid[], %(version)s::text[],"
        "             %(reason)s::text[], %(miss)s::text[])"
        "      WITH ORDINALITY AS r(status, release, version, reason, miss, k)",
        {
            "agent": world.agent,
            "org": world.org,
            **{
                column: [row[i] for row in rows]
                for i, column in enumerate(("status", "release", "version", "reason", "miss"))
            },
        },
    )
    assert world.counts() == {
        (None, "missed", "throttled"): 2,
        (None, "missed", "offline"): 2,
        (world.old, "up_to_date", ""): 1,
        (None, "up_to_date", ""): 1,
        (world.new, "failed", "disk_full"): 1,
    }


def test_the_upgrade_counts_the_history_on_record(empty_database_url: str) -> None:
    assert BEFORE is not None
    migrate.upgrade(empty_database_url, BEFORE)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        world = World(conn)
        world.run("succeeded", release=world.new)
        world.run("failed", release=world.new, reason="disk_full")
        world.run("claimed", release=world.new)
        world.run("missed", miss="offline")
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        world.conn = conn
        assert world.counts() == {
            (world.new, "succeeded", ""): 1,
            (world.new, "failed", "disk_full"): 1,
            (None, "missed", "offline"): 1,
        }
        # It downgrades and upgrades again with the history counted once more, from scratch.
        migrate.downgrade(empty_database_url, BEFORE)
        migrate.upgrade(empty_database_url)
        assert sum(world.counts().values()) == 3


def test_a_switch_without_permission_is_a_refused_outcome_of_its_release(
    world: World, services: Services, clock: ManualClock
) -> None:
    world.run("unauthorised", release=world.new, reason="token_revoked")
    world.run(
        "skipped", release=world.new, skip="release_rolled_back"
    )  # consumed the slot; not an update of the release
    world.offer(world.new)
    assert world.shown(services, clock) == {("1.6.0", "refused", "token_revoked"): 1}


@pytest.mark.parametrize("reason", ["token_revoked", "window_closed"])
def test_an_update_the_control_plane_stopped_is_a_refused_outcome_not_a_failure(
    world: World, services: Services, clock: ManualClock, reason: str
) -> None:
    """Its token revoked, or its switch refused because the window had closed."""
    world.run("failed", release=world.new, reason=reason)
    world.run("failed", release=world.new, reason="health_check_failed")
    world.offer(world.new)
    assert world.shown(services, clock) == {
        ("1.6.0", "refused", reason): 1,
        ("1.6.0", "failed", "health_check_failed"): 1,
    }


def test_a_release_nobody_is_offered_or_runs_leaves_the_scrape(
    world: World, services: Services, clock: ManualClock
) -> None:
    """The outcome series grow with the releases in use, not with every release ever published:
    an old release's series stay while an agent runs it and go when none does."""
    world.run("succeeded", release=world.old)
    world.run("failed", release=world.new, reason="health_check_failed")
    world.offer(world.new)
    world.runs_version("1.5.0")
    assert world.shown(services, clock) == {
        ("1.5.0", "succeeded", ""): 1,
        ("1.6.0", "failed", "health_check_failed"): 1,
    }
    world.runs_version("1.6.0")
    assert world.shown(services, clock) == {("1.6.0", "failed", "health_check_failed"): 1}
    # The counts themselves are kept: an agent back on 1.5.0 brings its series back as it was.
    world.runs_version("1.5.0")
    assert ("1.5.0", "succeeded", "") in world.shown(services, clock)


def test_a_release_of_another_pair_with_the_version_an_agent_runs_is_not_in_use(
    world: World, services: Services, clock: ManualClock
) -> None:
    """An agent runs the release of its own pair: the same version published for another
    channel is not in use because of it (its series stay out of the scrape)."""
    beta = _one(
        world.conn,
        _RELEASE.replace("'stable'", "'beta'"),
        3,
        "1.5.0",
    )
    world.conn.execute(
        "INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)"
        " VALUES (%s, 'stable', 'linux-x86_64', now())",
        [world.agent],
    )
    world.run("succeeded", release=world.old)
    world.run("failed", release=beta, reason="health_check_failed")
    world.runs_version("1.5.0")
    shown = {
        (o.channel, o.version, o.outcome): o.count
        for o in services.metrics.snapshot(clock.now()).release_outcomes
        if o.count
    }
    assert shown == {("stable", "1.5.0", "succeeded"): 1}


def _totals(conn: Conn) -> dict[tuple[str, str, str], int]:
    rows = conn.execute("SELECT trigger, status, reason, n FROM run_ending_totals").fetchall()
    return {(trigger, status, reason): n for trigger, status, reason, n in rows}


def test_the_totals_over_every_release_follow_the_counts(
    world: World, services: Services, clock: ManualClock
) -> None:
    """`/metrics`' runs by status and misses by reason come from totals kept as each ending is
    counted; a release deleted takes its own counts but nothing from the totals."""
    world.run("succeeded", release=world.old)
    run = world.run("claimed", release=world.new)
    world.conn.execute(
        "UPDATE runs SET status = 'failed', outcome_reason = 'disk_full' WHERE id = %s", [run]
    )
    world.run("succeeded", release=world.new)
    world.run("missed", miss="offline")
    assert _totals(world.conn) == {
        ("schedule", "succeeded", ""): 2,
        ("schedule", "failed", "disk_full"): 1,
        ("schedule", "missed", "offline"): 1,
    }
    snapshot = services.metrics.snapshot(clock.now())
    assert dict(snapshot.runs)[("schedule", "succeeded")] == 2
    assert dict(snapshot.missed) == {("offline",): 1}
    assert dict(snapshot.slot_endings)[("failed", "disk_full")] == 1

    world.conn.execute("DELETE FROM runs WHERE release_id = %s", [world.old])
    world.conn.execute("DELETE FROM releases WHERE id = %s", [world.old])
    assert (world.old, "succeeded", "") not in world.counts()
    assert _totals(world.conn)[("schedule", "succeeded", "")] == 2
    assert dict(services.metrics.snapshot(clock.now()).runs)[("schedule", "succeeded")] == 2


def test_the_upgrade_to_totals_counts_the_endings_on_record(empty_database_url: str) -> None:
    totals = importlib.import_module("control_plane.migrations.versions.rev0031_run_ending_totals")
    migrate.upgrade(empty_database_url, totals.down_revision)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        world = World(conn)
        world.run("succeeded", release=world.old)
        world.run("succeeded", release=world.new)
        world.run("missed", miss="offline")
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        assert _totals(conn) == {
            ("schedule", "succeeded", ""): 2,
            ("schedule", "missed", "offline"): 1,
        }
        # Counted from then on by the trigger, on top of what was on record.
        world.conn = conn
        world.run("missed", miss="offline")
        assert _totals(conn)[("schedule", "missed", "offline")] == 2
