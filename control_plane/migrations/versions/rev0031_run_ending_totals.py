"""The run endings' totals kept as they are counted, so `/metrics` reads the same rows on the
first day and after years.

Revision ID: 0031_run_ending_totals
Revises: 0030 (see `down_revision`)

- `run_ending_totals`: how many runs ended per (trigger, status, reason), over every release.
  `/metrics` showed these totals by summing `run_ending_counts` (migration 0013), which holds a
  row per release ever published and each of its endings: about 1,500 rows after a year of
  weekly releases, read on every scrape, and more each year.
- Kept by a trigger on `run_ending_counts` itself, adding each row's increase: whatever counts a
  run's ending (the insert and update triggers on `runs`, of this release or the previous one)
  adds to the totals in the same statement, and there is no second copy of the rule that decides
  what an ending is.
- A release deleted takes its rows of `run_ending_counts` with it (ON DELETE CASCADE) but nothing
  from the totals: a counter only grows.
- The totals start from the counts on record, added after the trigger is made: making it takes
  the lock that keeps writers of `run_ending_counts` out until this migration commits, so no
  ending is added twice or lost.

Expand-only: a new table and a trigger on a table only the database's own triggers write; a
replica of the previous release counts and reads as before.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0030_run_endings_per_statement"

revision = "0031_run_ending_totals"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE run_ending_totals (
    trigger text   NOT NULL,
    status  text   NOT NULL,
    reason  text   NOT NULL,
    n       bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (trigger, status, reason)
);

CREATE FUNCTION add_run_ending_total() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    added bigint := NEW.n - CASE WHEN TG_OP = 'UPDATE' THEN OLD.n ELSE 0 END;
BEGIN
    IF added > 0 THEN
        INSERT INTO run_ending_totals AS t (trigger, status, reason, n)
        VALUES (NEW.trigger, NEW.status, NEW.reason, added)
        ON CONFLICT (trigger, status, reason) DO UPDATE SET n = t.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER run_ending_counts_add_total AFTER INSERT OR UPDATE OF n ON run_ending_counts
    FOR EACH ROW EXECUTE FUNCTION add_run_ending_total();

INSERT INTO run_ending_totals (trigger, status, reason, n)
SELECT trigger, status, reason, sum(n) FROM run_ending_counts GROUP BY 1, 2, 3;
"""

DOWNGRADE = """
DROP TRIGGER run_ending_counts_add_total ON run_ending_counts;
DROP FUNCTION add_run_ending_total();
DROP TABLE run_ending_totals;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
