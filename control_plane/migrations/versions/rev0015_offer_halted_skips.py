"""A slot offered a stopped release is skipped with its reason.

Revision ID: 0015_offer_halted_skips
Revises: 0014 (see `down_revision`)

- Skip reason `release_halted`: a scheduled claim of a release that is halted or under its own
  brake consumes the slot with a `skipped` run (the agent page says why; the agent stops asking
  until its next slot), instead of being refused every minute until the window closes.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0014_waves_plan"

revision = "0015_offer_halted_skips"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE runs DROP CONSTRAINT runs_skip_reason_known;
ALTER TABLE runs ADD CONSTRAINT runs_skip_reason_known
    CHECK (skip_reason IN ('held', 'release_rolled_back', 'release_halted'));
"""

# The skipped slots become what the previous schema called them: missed under a stop.
DOWNGRADE = """
UPDATE runs SET status = 'missed', skip_reason = NULL, miss_reason = 'brake'
 WHERE skip_reason = 'release_halted';
ALTER TABLE runs DROP CONSTRAINT runs_skip_reason_known;
ALTER TABLE runs ADD CONSTRAINT runs_skip_reason_known
    CHECK (skip_reason IN ('held', 'release_rolled_back'));
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
