"""The panel's history of an organisation, paged newest first by (time, id).

Revision ID: 0024_history_pages
Revises: 0023 (see `down_revision`)

- runs (org_id, created_at DESC, id DESC)   an organisation's runs of every kind, a page at a
  time and in a date range (the indexes migration 0019 built cover only manual runs by time and
  scheduled runs by slot)
- events (org_id, at DESC, id DESC)         an organisation's events by time (0019's events
  (org_id, id DESC) orders by id only, which cannot answer a range of days)

An agent's own runs and events are paged through the indexes migration 0004 built: runs
(agent_id, created_at DESC) and events (agent_id, at DESC, id DESC).

Expand-only: two new indexes, which a replica of the previous release does not read. Built inside
the migration's transaction (`CREATE INDEX CONCURRENTLY` cannot run there), so writers of runs and
events wait while they build: seconds on a small install, about a minute on a year of 10,000
agents. Run the upgrade outside the update windows.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0023_kept_offers"

revision = "0024_history_pages"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

# (name, table, definition)
INDEXES = (
    ("runs_org_created", "runs", "(org_id, created_at DESC, id DESC)"),
    ("events_org_at", "events", "(org_id, at DESC, id DESC)"),
)


def upgrade() -> None:
    for name, table, definition in INDEXES:
        op.execute(f"CREATE INDEX {name} ON {table} {definition}")


def downgrade() -> None:
    for name, _table, _definition in INDEXES:
        op.execute(f"DROP INDEX IF EXISTS {name}")
