"""No throttle token in the last moments of a catch-up window.

Revision ID: 0032_grant_margin
Revises: 0031 (see `down_revision`)

- `platform_settings.grant_margin_seconds`: a scheduled claim is granted a new token only while
  at least this much of its slot's window is left (default 60, one round). The switch is refused
  once the window has closed, so a token granted in the window's last seconds bought a download
  that could not finish in time and a run that ended `failed`. 0 grants until the close, as
  before; the margin is always shorter than the window, which the constraint holds in the same
  row. A window of one minute (allowed before) has no room for the default: it gets 0, and
  grants until the close as it did.

Expand-only: a column with a default. A replica of the previous release neither reads nor writes
it (its settings update names its own columns), so it grants until the close while it serves.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0031_run_ending_totals"

revision = "0032_grant_margin"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE platform_settings ADD COLUMN grant_margin_seconds integer NOT NULL DEFAULT 60;
UPDATE platform_settings SET grant_margin_seconds = 0 WHERE catch_up_minutes * 60 <= 60;
ALTER TABLE platform_settings
    ADD CONSTRAINT platform_settings_grant_margin_range
        CHECK (grant_margin_seconds >= 0 AND grant_margin_seconds < catch_up_minutes * 60);
"""

DOWNGRADE = """
ALTER TABLE platform_settings DROP COLUMN grant_margin_seconds;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
