"""The retention walk removes the agents' unreachable reports too, and counts them.

Revision ID: 0039_unreachable_retention
Revises: 0038_run_stopped_by

- `retention_progress.unreachable_reports_removed`: how many rows of `unreachable_reports` the
  walks removed so far (the counter only grows), as the other tables' counters.

Expand-only: a column with a default. A replica of the previous release names the counters it
reads and writes, so it never touches this one; a walk it started and this release completes
counts what this release removed.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0038_run_stopped_by"

revision = "0039_unreachable_retention"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE retention_progress
    ADD COLUMN unreachable_reports_removed bigint NOT NULL DEFAULT 0
        CHECK (unreachable_reports_removed >= 0);
"""

DOWNGRADE = """
ALTER TABLE retention_progress DROP COLUMN unreachable_reports_removed;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
