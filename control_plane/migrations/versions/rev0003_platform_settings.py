"""The platform's settings: time zone, catch-up window and the two caps, in one row.

Revision ID: 0003_platform_settings
Revises: 0002_agent_update_schedule

Settings live in the database so every replica reads the same values. The API validates them
(the time zone against the zone database); the constraints keep any other writer in range.
"""

from __future__ import annotations

from alembic import op

revision = "0003_platform_settings"
down_revision: str | None = "0002_agent_update_schedule"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE platform_settings (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    timezone         text        NOT NULL DEFAULT 'Europe/Amsterdam' CHECK (length(timezone) > 0),
    catch_up_minutes integer     NOT NULL DEFAULT 15 CHECK (catch_up_minutes BETWEEN 1 AND 120),
    org_cap          integer     NOT NULL DEFAULT 5 CHECK (org_cap >= 0),
    global_cap       integer     NOT NULL DEFAULT 25 CHECK (global_cap >= 0),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
INSERT INTO platform_settings DEFAULT VALUES;
"""

DOWNGRADE = """
DROP TABLE platform_settings;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
