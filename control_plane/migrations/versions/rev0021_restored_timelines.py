"""The restores `after-restore` has finished, so replicas know a restored database may be served.

Revision ID: 0021_restored_timelines
Revises: 0020 (see `down_revision`)

- `restored_timelines`: one row per (cluster, timeline) `nachtwacht control after-restore` ran
  on. A server restored to a point in time comes up on a new timeline of the same cluster, which
  looks like a promotion; a replica serves such a server only once its timeline is here.

Expand-only: a new table. A replica of the previous release reads none of it.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0020_retention"

revision = "0021_restored_timelines"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE restored_timelines (
    system_identifier text        NOT NULL,
    timeline          integer     NOT NULL CHECK (timeline > 0),
    finished_at       timestamptz NOT NULL,
    PRIMARY KEY (system_identifier, timeline)
);
"""

DOWNGRADE = """
DROP TABLE restored_timelines;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
