"""Migration 0034: a run's bookkeeping that is in no answer (the review's stamp, how the build
came) notes no change of its agent; every other write of a run still does; its downgrade notes
them all again."""

from __future__ import annotations

import re

import psycopg

from control_plane import migrate
from control_plane.migrations.versions import rev0034_answer_neutral_run_writes as revision
from tests.control_plane.answers_cache.change_feed import an_agent, changes_noted

# The columns of `runs` that no config or claim answer reads (`agent_config.services`, `claims`
# and the offers they join name none of them), each with what writes it.
IN_NO_ANSWER = {
    "notify_considered_at": "the nightly review's stamp",
    "delivery": "how the build came, beside the outcome",
    "patch_fallback_reason": "why a patch fell back to the full build, beside the outcome",
    "stopped_by": "what stopped a skipped slot's release, written by the run's insert",
}

ADD_RUN = (
    "INSERT INTO runs (agent_id, org_id, trigger, slot_key, slot_at, status, created_at,"
    " claimed_at) SELECT id, org_id, 'schedule', '2026-11-30T03:00', '2026-11-30T02:00Z',"
    " 'claimed', '2026-11-30T02:01Z', '2026-11-30T02:01Z' FROM agents WHERE id = %s"
)
FINISH = (
    "UPDATE runs SET status = 'succeeded', version = '1.5.0', finished_at = '2026-11-30T02:05Z'"
    " WHERE agent_id = %s"
)
CONSIDER = "UPDATE runs SET notify_considered_at = '2026-11-30T03:00Z' WHERE agent_id = %s"
DELIVERED = (
    "UPDATE runs SET delivery = 'full', patch_fallback_reason = 'base_missing' WHERE agent_id = %s"
)


def test_a_runs_bookkeeping_notes_no_change_and_its_outcome_does(
    empty_database_url: str,
) -> None:
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        agent = an_agent(conn)
        noted = {("agent", agent)}
        assert changes_noted(conn, ADD_RUN, agent) == noted
        assert changes_noted(conn, FINISH, agent) == noted
        assert changes_noted(conn, CONSIDER, agent) == set()
        assert changes_noted(conn, DELIVERED, agent) == set()
        # The stamp written with a change of the answer is still that change.
        restated = (
            "UPDATE runs SET notify_considered_at = now(), status = 'failed' WHERE agent_id = %s"
        )
        assert changes_noted(conn, restated, agent) == noted
        assert (
            changes_noted(conn, "UPDATE runs SET slot_key = 'x' WHERE agent_id = %s", agent)
            == noted
        )
        assert changes_noted(conn, "DELETE FROM runs WHERE agent_id = %s", agent) == noted


def test_its_downgrade_notes_the_bookkeeping_again(empty_database_url: str) -> None:
    migrate.upgrade(empty_database_url)
    migrate.downgrade(empty_database_url, revision.down_revision or "base")
    with psycopg.connect(empty_database_url, autocommit=True) as conn:
        agent = an_agent(conn)
        noted = {("agent", agent)}
        assert changes_noted(conn, ADD_RUN, agent) == noted
        assert changes_noted(conn, FINISH, agent) == noted
        assert changes_noted(conn, CONSIDER, agent) == noted
        assert changes_noted(conn, DELIVERED, agent) == noted
        assert changes_noted(conn, "DELETE FROM runs WHERE agent_id = %s", agent) == noted
        triggers = conn.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'runs'::regclass"
            " AND tgname LIKE 'runs_answer%%' ORDER BY tgname"
        ).fetchall()
        assert triggers == [("runs_answer_change",)]


def test_every_column_of_a_run_is_compared_or_in_no_answer(empty_database_url: str) -> None:
    """The update's trigger names the columns it compares: a column added to `runs` is compared
    once a migration names it there, or is listed above as in no answer (with the proof)."""
    migrate.upgrade(empty_database_url)
    with psycopg.connect(empty_database_url) as conn:
        columns = {
            str(name)
            for (name,) in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'runs'::regclass"
                " AND attnum > 0 AND NOT attisdropped"
            )
        }
        row = conn.execute(
            "SELECT pg_get_triggerdef(oid) FROM pg_trigger"
            " WHERE tgrelid = 'runs'::regclass AND tgname = 'runs_answer_change'"
        ).fetchone()
    assert row is not None
    compared_old = set(re.findall(r"\bold\.(\w+)", str(row[0])))
    compared_new = set(re.findall(r"\bnew\.(\w+)", str(row[0])))
    assert compared_old == compared_new == columns - IN_NO_ANSWER.keys()
