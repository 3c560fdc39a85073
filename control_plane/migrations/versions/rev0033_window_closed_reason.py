"""A run whose switch was refused because its window had closed ends with a reason of its own.

Revision ID: 0033_window_closed_reason
Revises: 0032 (see `down_revision`)

- `runs.outcome_reason` may also be `window_closed`: the control plane refused the switch because
  the slot's window had closed before the build was ready, and nothing failed on the way. Such a
  run was recorded `interrupted` before, and counted towards its release's automatic halt,
  though it says nothing of the build.

Expand-only: the CHECK is made again under its own name, wider, and added NOT VALID, so no row is
scanned while `runs` is locked for the catalogue change (every row already holds one of the
narrower list's values). A replica of the previous release never writes the new value.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0032_grant_margin"

revision = "0033_window_closed_reason"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE runs
    DROP CONSTRAINT runs_outcome_reason_known,
    ADD CONSTRAINT runs_outcome_reason_known CHECK (outcome_reason IN (
        'platform_unavailable', 'interrupted', 'token_revoked', 'token_expired', 'disk_full',
        'download_failed', 'verification_failed', 'install_failed', 'health_check_failed',
        'window_closed')) NOT VALID;
"""

DOWNGRADE = """
ALTER TABLE runs
    DROP CONSTRAINT runs_outcome_reason_known,
    ADD CONSTRAINT runs_outcome_reason_known CHECK (outcome_reason IN (
        'platform_unavailable', 'interrupted', 'token_revoked', 'token_expired', 'disk_full',
        'download_failed', 'verification_failed', 'install_failed', 'health_check_failed'))
        NOT VALID;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
