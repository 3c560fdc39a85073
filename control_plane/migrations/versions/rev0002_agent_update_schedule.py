"""Every agent gets an update schedule: on, at 03:00 — by the column defaults, in one statement.

Revision ID: 0002_agent_update_schedule
Revises: 0001_orgs_agents_credentials

This revision holds the schedule alone: the defaults do the work for every row that exists and
every row inserted later without naming the columns; no seed script, no application code.

The CHECK constraint is the database's layer of the time pattern (the API validator is the other).
Its pattern and limit are written out as they were when this revision was made (`TIME_PATTERN` and
`MAX_TIMES` of `ground.limits`): a migration is frozen, so a fresh database and an upgraded one get
the same constraint. A change to the pattern is a new migration; a test compares the migrated CHECK
with today's constants.

A CHECK cannot hold a subquery, so it selects the *bad* elements with a jsonpath filter and
requires that selection to be empty. In jsonpath a regex match on a non-string is unknown and
`!unknown` is unknown, so the filter tests the type first; `strict` mode keeps nested arrays from
being unwrapped into their strings; the CASE makes "not an array" false before anything treats the
value as one.
"""

from __future__ import annotations

from alembic import op

revision = "0002_agent_update_schedule"
down_revision: str | None = "0001_orgs_agents_credentials"
branch_labels = None
depends_on = None

# A time is HH:MM on the five-minute grid, and a schedule holds at most one time per grid step.
TIME_PATTERN = "^([01][0-9]|2[0-3]):[0-5][05]$"
MAX_TIMES = 288


def _jsonpath_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# Selects every element that is not a string on the grid; the constraint wants it to select nothing.
BAD_ELEMENTS_JSONPATH = (
    f'strict $[*] ? (@.type() != "string" || !(@ like_regex {_jsonpath_string(TIME_PATTERN)}))'
)

# Built from this revision's constants only, never from input.
UPGRADE = f"""
ALTER TABLE agents
    ADD COLUMN update_schedule_enabled boolean NOT NULL DEFAULT true,
    ADD COLUMN update_schedule_times   jsonb   NOT NULL DEFAULT '["03:00"]';

-- Duplicates need one element compared with another, which a jsonpath filter cannot express.
CREATE FUNCTION nachtwacht_jsonb_elements_distinct(elements jsonb) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
        SELECT count(*) = count(DISTINCT element) FROM jsonb_array_elements(elements) AS element
    $$;

ALTER TABLE agents ADD CONSTRAINT agents_update_schedule_times_valid CHECK (
    CASE WHEN jsonb_typeof(update_schedule_times) = 'array' THEN
        NOT (update_schedule_times @? {_sql_string(BAD_ELEMENTS_JSONPATH)}::jsonpath)
        AND jsonb_array_length(update_schedule_times) <= {MAX_TIMES:d}
        AND (jsonb_array_length(update_schedule_times) > 0 OR NOT update_schedule_enabled)
        AND nachtwacht_jsonb_elements_distinct(update_schedule_times)
    ELSE false END
);
"""  # noqa: S608

DOWNGRADE = """
ALTER TABLE agents DROP CONSTRAINT agents_update_schedule_times_valid;
DROP FUNCTION nachtwacht_jsonb_elements_distinct(jsonb);
ALTER TABLE agents DROP COLUMN update_schedule_times, DROP COLUMN update_schedule_enabled;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
