"""History grows; its reads must not: figures counted as they are written, and the indexes the
history's reads need.

Revision ID: 0019_bounded_history_reads
Revises: 0018 (see `down_revision`)

- `history_counts`: what `/metrics` showed by counting whole tables on every scrape, kept as the
  rows are written by statement triggers (one UPDATE per statement, however many rows it wrote):
  tokens granted, notifications written, claim refusals recorded (by reason), webhook deliveries
  (by state: a delivery that changes state moves from one count to the other) and webhook
  attempts (by outcome). Only writes move them: removing old rows (an agent deleted, old history
  removed) lowers none, so a figure never goes back. Counted once from the tables here, while the
  new triggers hold off writers of those five tables (small tables: a year of 10,000 agents holds
  a few hundred thousand rows among them).
- Indexes for the history's reads. Built inside the migration's transaction (every step of an
  upgrade is one transaction, under the migrations' lock), so writers of runs, events and
  notifications wait while they build: seconds on a small install, about a minute on a year of
  10,000 agents. Run the upgrade outside the update windows.
    events (run_id)                 a run's events, and the cascade when a run is removed
    events (org_id, id DESC)        the operators' trail of one organisation, newest first
    events (kind, id DESC)          the trail of one kind, or of a family of kinds (prefix)
    events (actor_id, id DESC)      the trail of one actor
    runs (org_id, created_at DESC)  the task tray: an organisation's manual updates, newest first
        WHERE trigger = 'manual'
    runs (org_id, slot_at)          one organisation's runs of one slot (the per-slot review)
        WHERE trigger = 'schedule'
    notifications (org_id, created_at DESC) WHERE read_at IS NULL   the unread count and list
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0018_enrollment_tokens"

revision = "0019_bounded_history_reads"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

COUNTS = r"""
CREATE TABLE history_counts (
    figure text   NOT NULL CHECK (figure IN ('tokens_granted', 'notifications', 'claim_refusals',
                                             'webhook_deliveries', 'webhook_attempts')),
    label  text   NOT NULL,
    n      bigint NOT NULL CHECK (n >= 0),
    PRIMARY KEY (figure, label)
);

-- An UPDATE first: a proposed row with a negative `n` (a delivery leaving a state) would fail the
-- CHECK even when ON CONFLICT would have turned it into an update.
CREATE FUNCTION count_history_rows(p_figure text, p_label text, p_n bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    UPDATE history_counts SET n = n + p_n WHERE figure = p_figure AND label = p_label;
    IF NOT FOUND THEN
        INSERT INTO history_counts AS c (figure, label, n) VALUES (p_figure, p_label, p_n)
        ON CONFLICT (figure, label) DO UPDATE SET n = c.n + excluded.n;
    END IF;
END
$$;

CREATE FUNCTION count_tokens_granted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count_history_rows('tokens_granted', '', count(*)) FROM added HAVING count(*) > 0;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_notifications() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count_history_rows('notifications', '', count(*)) FROM added HAVING count(*) > 0;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_claim_refusals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count_history_rows('claim_refusals', reason, count(*)) FROM added GROUP BY reason;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_webhook_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count_history_rows('webhook_attempts', outcome, count(*)) FROM added
      GROUP BY outcome;
    RETURN NULL;
END
$$;

CREATE FUNCTION count_webhook_deliveries_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count_history_rows('webhook_deliveries', state, count(*)) FROM added GROUP BY state;
    RETURN NULL;
END
$$;

-- A delivery that changed state leaves one count for the other.
CREATE FUNCTION count_webhook_deliveries_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count_history_rows('webhook_deliveries', state, sum(moved)::bigint)
       FROM (SELECT b.state, -1 AS moved FROM before b JOIN after a USING (notification_id)
              WHERE a.state <> b.state
             UNION ALL
             SELECT a.state, 1 FROM before b JOIN after a USING (notification_id)
              WHERE a.state <> b.state) AS m
      GROUP BY state;
    RETURN NULL;
END
$$;

CREATE TRIGGER tokens_count_granted AFTER INSERT ON tokens
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_tokens_granted();
CREATE TRIGGER notifications_count AFTER INSERT ON notifications
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_notifications();
CREATE TRIGGER claim_refusals_count AFTER INSERT ON claim_refusals
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_claim_refusals();
CREATE TRIGGER webhook_attempts_count AFTER INSERT ON webhook_attempts
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION count_webhook_attempts();
CREATE TRIGGER webhook_deliveries_count_added AFTER INSERT ON webhook_deliveries
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT
    EXECUTE FUNCTION count_webhook_deliveries_added();
CREATE TRIGGER webhook_deliveries_count_moved AFTER UPDATE ON webhook_deliveries
    REFERENCING OLD TABLE AS before NEW TABLE AS after FOR EACH STATEMENT
    EXECUTE FUNCTION count_webhook_deliveries_moved();

-- The figures so far, once; the triggers above hold off writers until this commits.
INSERT INTO history_counts (figure, label, n)
SELECT 'tokens_granted', '', count(*) FROM tokens
UNION ALL SELECT 'notifications', '', count(*) FROM notifications
UNION ALL SELECT 'claim_refusals', reason, count(*) FROM claim_refusals GROUP BY reason
UNION ALL SELECT 'webhook_deliveries', state, count(*) FROM webhook_deliveries GROUP BY state
UNION ALL SELECT 'webhook_attempts', outcome, count(*) FROM webhook_attempts GROUP BY outcome;
"""

# (name, table, definition)
INDEXES = (
    ("events_run", "events", "(run_id) WHERE run_id IS NOT NULL"),
    ("events_org_id", "events", "(org_id, id DESC) WHERE org_id IS NOT NULL"),
    ("events_kind_id", "events", "(kind text_pattern_ops, id DESC)"),
    ("events_actor_id", "events", "(actor_id, id DESC) WHERE actor_id IS NOT NULL"),
    ("runs_manual_by_org", "runs", "(org_id, created_at DESC) WHERE trigger = 'manual'"),
    ("runs_org_slot", "runs", "(org_id, slot_at) WHERE trigger = 'schedule'"),
    (
        "notifications_org_unread",
        "notifications",
        "(org_id, created_at DESC) WHERE read_at IS NULL",
    ),
)

DOWNGRADE = """
DROP TRIGGER tokens_count_granted ON tokens;
DROP TRIGGER notifications_count ON notifications;
DROP TRIGGER claim_refusals_count ON claim_refusals;
DROP TRIGGER webhook_attempts_count ON webhook_attempts;
DROP TRIGGER webhook_deliveries_count_added ON webhook_deliveries;
DROP TRIGGER webhook_deliveries_count_moved ON webhook_deliveries;
DROP FUNCTION count_tokens_granted(), count_notifications(), count_claim_refusals(),
    count_webhook_attempts(), count_webhook_deliveries_added(), count_webhook_deliveries_moved(),
    count_history_rows(text, text, bigint);
DROP TABLE history_counts;
"""


def upgrade() -> None:
    op.execute(COUNTS)
    for name, table, definition in INDEXES:
        op.execute(f"CREATE INDEX {name} ON {table} {definition}")


def downgrade() -> None:
    for name, _table, _definition in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
    op.execute(DOWNGRADE)
