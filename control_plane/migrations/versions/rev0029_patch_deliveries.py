"""Delta updates, reported: how each run's build came, and the fallbacks counted by reason.

Revision ID: 0029_patch_deliveries
Revises: 0028 (see `down_revision`)

- `runs.delivery`: `patch` (from the host's own base) or `full` (the artifact), as the agent
  reported it with the outcome; NULL when it did not say (an agent older than the field, or a run
  that downloaded nothing).
- `runs.patch_fallback_reason`: why a run whose release offered a patch took the full build
  (NULL for a patch, or when no patch was offered to that host).
- `patch_fallback_counts`: every fallback counted once, by reason, as its run's delivery is first
  recorded, read by /metrics (a row per reason from the start, so each series starts at 0; the
  retention walk removing old runs lowers nothing).

Expand-only: two nullable columns without a default (no row rewritten) and their CHECKs added NOT
VALID (no row scanned: `runs` is locked only for the catalogue change, and it is the only table
this migration locks that a replica reads), and a new table. A replica of the previous release
reads none of them, and is refused the field by its own contract (agents send it only to a
control plane that says it reads it).
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0028_database_clusters"

revision = "0029_patch_deliveries"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE runs
    ADD COLUMN delivery text,
    ADD COLUMN patch_fallback_reason text,
    ADD CONSTRAINT runs_delivery_known CHECK (delivery IN ('patch', 'full')) NOT VALID,
    ADD CONSTRAINT runs_patch_fallback_reason_known CHECK (
        patch_fallback_reason IN ('base_missing', 'base_altered', 'patch_download_failed',
                                  'patch_refused', 'memory_bound', 'patched_build_changed',
                                  'mirror')
    ) NOT VALID,
    ADD CONSTRAINT runs_patch_fallback_only_when_full CHECK (
        patch_fallback_reason IS NULL OR delivery = 'full'
    ) NOT VALID;

CREATE TABLE patch_fallback_counts (
    reason text   PRIMARY KEY CONSTRAINT patch_fallback_counts_reason_known CHECK (
        reason IN ('base_missing', 'base_altered', 'patch_download_failed', 'patch_refused',
                   'memory_bound', 'patched_build_changed', 'mirror')
    ),
    n      bigint NOT NULL DEFAULT 0 CHECK (n >= 0)
);
INSERT INTO patch_fallback_counts (reason) VALUES ('base_missing'), ('base_altered'),
    ('patch_download_failed'), ('patch_refused'), ('memory_bound'), ('patched_build_changed'),
    ('mirror');
"""

DOWNGRADE = """
DROP TABLE patch_fallback_counts;
ALTER TABLE runs
    DROP CONSTRAINT runs_patch_fallback_only_when_full,
    DROP CONSTRAINT runs_patch_fallback_reason_known,
    DROP CONSTRAINT runs_delivery_known,
    DROP COLUMN patch_fallback_reason,
    DROP COLUMN delivery;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
