"""The sign-in lock kept per address typed, whether or not it is a person's.

Revision ID: 0041_sign_in_failures
Revises: 0040_runs_slot_first

- `sign_in_failures`: one row per address tried lately, by the sha256 of the address as typed
  (trimmed, lower case), so no list of typed addresses is kept: the failures in a row, the lock's
  end, and the last attempt (a row a day older than that is forgotten). An address nobody has is
  counted and locked exactly as a person's, so the answers do not tell which addresses exist.
- `retention_progress.sign_in_failures_removed`: how many of those rows the retention walks
  removed so far (the counter only grows), as the other tables' counters.

Expand-only: a new table, its index and a counter column with a default. `people.failed_attempts`
and `people.locked_until` stay: a replica of the previous release still counts a person's
failures there until it is upgraded (during the upgrade a guesser's tries are counted by whichever
replica answers them); this release reads and writes them no more, and a later release removes
them in a contract step.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0040_runs_slot_first"

revision = "0041_sign_in_failures"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE sign_in_failures (
    address_sha256  text        PRIMARY KEY CHECK (address_sha256 ~ '^[0-9a-f]{64}$'),
    failed_attempts integer     NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
    locked_until    timestamptz,
    last_attempt_at timestamptz NOT NULL
);
CREATE INDEX sign_in_failures_by_last_attempt ON sign_in_failures (last_attempt_at);

ALTER TABLE retention_progress
    ADD COLUMN sign_in_failures_removed bigint NOT NULL DEFAULT 0
        CHECK (sign_in_failures_removed >= 0);
"""

DOWNGRADE = """
ALTER TABLE retention_progress DROP COLUMN sign_in_failures_removed;
DROP TABLE sign_in_failures;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
