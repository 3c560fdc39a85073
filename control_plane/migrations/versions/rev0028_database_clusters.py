"""The PostgreSQL clusters this database's data is known to live in, so a copy elsewhere is seen.

Revision ID: 0028_database_clusters
Revises: 0027 (see `down_revision`)

- `database_clusters`: the system identifier of each cluster the data was migrated on or
  finished a restore on (`after-restore`). A database restored with `pg_dump`/`pg_restore` into
  another cluster carries these rows with it, and its server's own identifier is not among them:
  the replicas do not serve it until `after-restore` has added it. The migration records the
  cluster it runs on.

Expand-only: a new table. A replica of the previous release reads none of it.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0027_updater_product"

revision = "0028_database_clusters"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE database_clusters (
    system_identifier text        PRIMARY KEY,
    recorded_at       timestamptz NOT NULL,
    recorded_by       text        NOT NULL CHECK (recorded_by IN ('migrate', 'after-restore'))
);

INSERT INTO database_clusters (system_identifier, recorded_at, recorded_by)
SELECT system_identifier::text, now(), 'migrate' FROM pg_control_system();
"""

DOWNGRADE = """
DROP TABLE database_clusters;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
