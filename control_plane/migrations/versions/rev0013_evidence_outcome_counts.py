"""Run endings counted as they happen, so `/metrics` reads a few rows instead of the runs table.

Revision ID: 0013_evidence_outcome_counts
Revises: 0012 (see `down_revision`)

- `run_ending_counts`: how many runs ended per (release, trigger, status, reason). A run is
  counted once, when it first leaves `requested` / `claimed` (or is inserted already ended: an
  `up_to_date`, `missed` or `skipped` row). A later correction of an inferred ending does not
  count again, and deleting old runs (retention) takes nothing away: the figures only grow, as
  a Prometheus counter must.
- `release_id` is the run's release; for an `up_to_date` run, which names none, the release of
  the agent's pair (`agent_tracks`) with the version it reported, when there is one.
- `reason` is the run's `outcome_reason`, `skip_reason` or `miss_reason`, or `''` when it has
  none.
- Existing runs are counted once here, so the counters start from the history on record.
- `runs_in_flight`: the runs not ended yet (`requested`, `claimed`), so they are counted without
  reading the others.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0012_count_claim_grant"

revision = "0013_evidence_outcome_counts"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE run_ending_counts (
    release_id uuid   REFERENCES releases (id) ON DELETE CASCADE,
    trigger    text   NOT NULL,
    status     text   NOT NULL,
    reason     text   NOT NULL,
    n          bigint NOT NULL CHECK (n >= 0),
    CONSTRAINT run_ending_counts_one_row UNIQUE NULLS NOT DISTINCT
        (release_id, trigger, status, reason)
);

-- PL/pgSQL keeps its plans: the lookup and the upsert are planned once per session.
CREATE FUNCTION count_run_ending() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    release uuid := NEW.release_id;
BEGIN
    IF release IS NULL AND NEW.status = 'up_to_date' THEN
        SELECT rel.id INTO release
          FROM agent_tracks t
          JOIN releases rel ON rel.channel = t.channel AND rel.platform = t.platform
                           AND rel.agent_version = NEW.version
         WHERE t.agent_id = NEW.agent_id
         ORDER BY rel.manifest_version DESC LIMIT 1;
    END IF;
    INSERT INTO run_ending_counts AS c (release_id, trigger, status, reason, n)
    VALUES (release, NEW.trigger, NEW.status,
            coalesce(NEW.outcome_reason, NEW.skip_reason, NEW.miss_reason, ''), 1)
    ON CONFLICT ON CONSTRAINT run_ending_counts_one_row DO UPDATE SET n = c.n + 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER runs_count_ending_inserted AFTER INSERT ON runs
    FOR EACH ROW WHEN (NEW.status NOT IN ('requested', 'claimed'))
    EXECUTE FUNCTION count_run_ending();
CREATE TRIGGER runs_count_ending_updated AFTER UPDATE OF status ON runs
    FOR EACH ROW WHEN (OLD.status IN ('requested', 'claimed')
                       AND NEW.status NOT IN ('requested', 'claimed'))
    EXECUTE FUNCTION count_run_ending();

CREATE INDEX runs_in_flight ON runs (trigger, status) WHERE status IN ('requested', 'claimed');

INSERT INTO run_ending_counts (release_id, trigger, status, reason, n)
SELECT coalesce(r.release_id, tracked.id), r.trigger, r.status,
       coalesce(r.outcome_reason, r.skip_reason, r.miss_reason, ''), count(*)
  FROM runs r
  LEFT JOIN LATERAL (
      SELECT rel.id FROM agent_tracks t
        JOIN releases rel ON rel.channel = t.channel AND rel.platform = t.platform
                         AND rel.agent_version = r.version
       WHERE r.release_id IS NULL AND r.status = 'up_to_date' AND t.agent_id = r.agent_id
       ORDER BY rel.manifest_version DESC LIMIT 1) AS tracked ON true
 WHERE r.status NOT IN ('requested', 'claimed')
 GROUP BY 1, 2, 3, 4;
"""

DOWNGRADE = """
DROP INDEX runs_in_flight;
DROP TRIGGER runs_count_ending_updated ON runs;
DROP TRIGGER runs_count_ending_inserted ON runs;
DROP FUNCTION count_run_ending();
DROP TABLE run_ending_counts;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
