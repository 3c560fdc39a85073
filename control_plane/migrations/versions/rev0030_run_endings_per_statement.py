"""A night's runs written into a year of history: their endings counted once per statement, their
ids in time order.

Revision ID: 0030_run_endings_per_statement
Revises: 0029 (see `down_revision`)

- `run_ending_counts` (migration 0013) was kept by a row trigger on every insert: an upsert of the
  counter row per run. The reconcile worker's missed pass inserts a night's misses in one
  statement, 10,000 rows for 10,000 agents, nearly all into the same few counter rows, and each
  upsert of a row already updated in the same transaction walks every version of it written
  before: the trigger took 1.6 to 4 s of that pass (`EXPLAIN ANALYZE`), more than the inserts
  themselves. The insert trigger now runs once per statement over the rows it inserted (a
  transition table), adding each (release, trigger, status, reason) once, by the rule 0013 states:
  an `up_to_date` run that names no release counts for the release of its pair with the version
  it reported. The trigger on an update of `status` stays per row: the product ends one run per
  statement.
- A run's id is made by `time_ordered_uuid()` instead of `gen_random_uuid()`: a version-7 UUID,
  the millisecond of its making in the first 48 bits and 74 random bits after. A random id lands
  on a random leaf of the primary key and of `events (run_id)`; after a year those indexes hold
  3.7 million entries, and a night's 10,000 new runs dirtied (and wrote into the WAL whole, once
  per checkpoint) nearly one leaf page each. Ids in time order go to the last pages. Measured on
  the year's database, the missed pass's insert took 1.9 s instead of 2.5 s (medians of 4). Ids
  made before stay as they are; nothing reads an order or a meaning into an id (pages order by
  time, and by id only to break ties).

Expand-only: the same counts, kept the same way for every writer; a replica of the previous
release inserts runs as before, is counted as before, and gets the new ids from the column's
default. Replacing the trigger and the default takes `runs`' lock for a catalogue change only, in
the migration's one transaction, so no insert is counted twice or missed while it runs.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0029_patch_deliveries"

revision = "0030_run_endings_per_statement"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE FUNCTION time_ordered_uuid() RETURNS uuid LANGUAGE sql VOLATILE AS $$
    -- A random (version 4) UUID with its first 6 bytes replaced by the Unix time in milliseconds
    -- and its version bits turned from 4 (0100) into 7 (0111).
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                    PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp())
                                                     * 1000)::bigint) FROM 3)
                    FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;
ALTER TABLE runs ALTER COLUMN id SET DEFAULT time_ordered_uuid();

CREATE FUNCTION count_run_endings_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_ending_counts AS c (release_id, trigger, status, reason, n)
    SELECT coalesce(r.release_id, tracked.id), r.trigger, r.status,
           coalesce(r.outcome_reason, r.skip_reason, r.miss_reason, ''), count(*)
      FROM added r
      LEFT JOIN LATERAL (
          SELECT rel.id FROM agent_tracks t
            JOIN releases rel ON rel.channel = t.channel AND rel.platform = t.platform
                             AND rel.agent_version = r.version
           WHERE r.release_id IS NULL AND r.status = 'up_to_date' AND t.agent_id = r.agent_id
           ORDER BY rel.manifest_version DESC LIMIT 1) AS tracked ON true
     WHERE r.status NOT IN ('requested', 'claimed')
     GROUP BY 1, 2, 3, 4
    ON CONFLICT ON CONSTRAINT run_ending_counts_one_row DO UPDATE SET n = c.n + excluded.n;
    RETURN NULL;
END
$$;

-- The same trigger, under its own name, made per statement.
DROP TRIGGER runs_count_ending_inserted ON runs;
CREATE TRIGGER runs_count_ending_inserted AFTER INSERT ON runs
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION count_run_endings_inserted();
"""

DOWNGRADE = """
ALTER TABLE runs ALTER COLUMN id SET DEFAULT gen_random_uuid();
DROP FUNCTION time_ordered_uuid();
DROP TRIGGER runs_count_ending_inserted ON runs;
CREATE TRIGGER runs_count_ending_inserted AFTER INSERT ON runs
    FOR EACH ROW WHEN (NEW.status NOT IN ('requested', 'claimed'))
    EXECUTE FUNCTION count_run_ending();
DROP FUNCTION count_run_endings_inserted();
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
