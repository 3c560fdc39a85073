"""An organisation's default schedule: what its new agents take when they enrol.

Revision ID: 0022_org_default_schedule
Revises: 0021 (see `down_revision`)

- `orgs.default_schedule_enabled`, `orgs.default_schedule_times`: both NULL (the organisation has
  not chosen one: a new agent takes the agents' column defaults, on at 03:00 in the platform's
  zone) or both set. Set, the times obey the agents' own rule (migration 0002: HH:MM on the
  five-minute grid, at most 288, no time twice, at least one while on), written out again here
  as that migration wrote it, with its function for distinct elements.

Enrolment copies the organisation's default into the new agent's row; changing the default
changes no agent already enrolled.

Expand-only: two nullable columns without a default (no table rewrite) and a CHECK that every
existing row (both NULL) passes. A replica of the previous release reads neither column and
enrols agents with the column defaults, as before.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0021_restored_timelines"

revision = "0022_org_default_schedule"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

# Selects every element that is not a time on the grid (migration 0002's filter, its pattern
# "^([01][0-9]|2[0-3]):[0-5][05]$"); the constraint wants it to select nothing.
BAD_ELEMENTS_JSONPATH = (
    'strict $[*] ? (@.type() != "string" || !(@ like_regex "^([01][0-9]|2[0-3]):[0-5][05]$"))'
)

UPGRADE = f"""
ALTER TABLE orgs
    ADD COLUMN default_schedule_enabled boolean,
    ADD COLUMN default_schedule_times   jsonb;

ALTER TABLE orgs ADD CONSTRAINT orgs_default_schedule_valid CHECK (
    (default_schedule_enabled IS NULL AND default_schedule_times IS NULL)
    OR (default_schedule_enabled IS NOT NULL AND default_schedule_times IS NOT NULL
        AND CASE WHEN jsonb_typeof(default_schedule_times) = 'array' THEN
            NOT (default_schedule_times @? '{BAD_ELEMENTS_JSONPATH}'::jsonpath)
            AND jsonb_array_length(default_schedule_times) <= 288
            AND (jsonb_array_length(default_schedule_times) > 0 OR NOT default_schedule_enabled)
            AND nachtwacht_jsonb_elements_distinct(default_schedule_times)
        ELSE false END)
);
"""

DOWNGRADE = """
ALTER TABLE orgs DROP CONSTRAINT orgs_default_schedule_valid;
ALTER TABLE orgs DROP COLUMN default_schedule_times, DROP COLUMN default_schedule_enabled;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
