"""How long history is kept, and the progress of its removal.

Revision ID: 0020_retention
Revises: 0019 (see `down_revision`)

- `platform_settings.retention_days`: runs, their events and notifications older than this many
  days are removed by the reconcile worker (default 400, between 30 and 3650).
- `retention_progress`: one row. A walk over the agents and organisations removes expired rows in
  short transactions; the row holds where the walk stands (so a walk interrupted by a restart or
  a failover goes on where it stopped), when the last walk completed, and how many rows every walk
  removed so far (the counters only grow).
- Indexes the removal needs so that deleting a notification does not read a whole table to find
  what refers to it: agent mentions and slot reviews by notification (a run's events are found
  by the index migration 0019 built on events (run_id)).

Expand-only: a column with a default, a new table, new indexes. A replica of the previous release
reads none of them. The indexes are built inside the migration's transaction (`CREATE INDEX
CONCURRENTLY` cannot run there), so writes to agent mentions and slot reviews wait while they are
built.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0019_bounded_history_reads"

revision = "0020_retention"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE platform_settings
    ADD COLUMN retention_days integer NOT NULL DEFAULT 400
        CONSTRAINT platform_settings_retention_days_range
        CHECK (retention_days BETWEEN 30 AND 3650);

CREATE TABLE retention_progress (
    singleton             boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    walk_started_at       timestamptz,
    walk_cutoff           timestamptz,
    walk_phase            text        CHECK (walk_phase IN ('agents', 'organisations', 'rounds')),
    walk_after            uuid,
    -- The counters below when the walk under way started: the walk's own figures at its end.
    walk_counted_before   jsonb,
    last_completed_at     timestamptz,
    last_completed_by     text,
    walks_completed       bigint      NOT NULL DEFAULT 0 CHECK (walks_completed >= 0),
    runs_removed          bigint      NOT NULL DEFAULT 0 CHECK (runs_removed >= 0),
    events_removed        bigint      NOT NULL DEFAULT 0 CHECK (events_removed >= 0),
    notifications_removed bigint      NOT NULL DEFAULT 0 CHECK (notifications_removed >= 0),
    refusals_removed      bigint      NOT NULL DEFAULT 0 CHECK (refusals_removed >= 0),
    reviews_removed       bigint      NOT NULL DEFAULT 0 CHECK (reviews_removed >= 0),
    rounds_removed        bigint      NOT NULL DEFAULT 0 CHECK (rounds_removed >= 0),
    -- A walk under way knows its cutoff and its phase; an idle one neither.
    CONSTRAINT retention_progress_walk_is_whole CHECK (
        (walk_started_at IS NULL) = (walk_cutoff IS NULL)
        AND (walk_started_at IS NULL) = (walk_phase IS NULL)
        AND (walk_started_at IS NULL) = (walk_counted_before IS NULL))
);
INSERT INTO retention_progress DEFAULT VALUES;

CREATE INDEX IF NOT EXISTS agent_mentions_by_notification ON agent_mentions (notification_id);
CREATE INDEX IF NOT EXISTS slot_reviews_by_notification ON slot_reviews (notification_id)
    WHERE notification_id IS NOT NULL;
"""

DOWNGRADE = """
DROP INDEX IF EXISTS slot_reviews_by_notification;
DROP INDEX IF EXISTS agent_mentions_by_notification;
DROP TABLE retention_progress;
ALTER TABLE platform_settings DROP COLUMN retention_days;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
