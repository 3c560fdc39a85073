"""A host whose clock is further off than its agent follows: the disagreement measured, and a miss
reason of its own.

Revision ID: 0036_host_clock
Revises: 0035 (see `down_revision`)

- `agent_clocks`: per agent, the latest disagreement between its host's clock (the `Date` header
  of its config poll) and the control plane's, host minus control plane, in whole seconds, with
  when it was measured. A row exists only while the latest poll that said its time was beyond the
  bound the agent follows (one day, `ground.limits.MAX_HOST_CLOCK_OFFSET_SECONDS`); a poll within
  it removes the row. A table of its own, not columns of `agents`: writing it touches none of the
  triggers on `agents` (the answers' change feed, the kept offers).
- `runs.miss_reason` may also be `host_clock`: the agent was seen in the window while its host's
  clock was that far off, so it asked for another day's slot.

Expand-only: a new table, and the CHECK made again under its own name, wider, NOT VALID (no row
is scanned; every row holds one of the narrower list's values). A replica of the previous release
never writes the new value, and reads it back as text it does not know ("reason unknown").
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0035_offer_marks"

revision = "0036_host_clock"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE agent_clocks (
    agent_id        uuid        PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    offset_seconds  bigint      NOT NULL,
    measured_at     timestamptz NOT NULL
);
ALTER TABLE runs
    DROP CONSTRAINT runs_miss_reason_known,
    ADD CONSTRAINT runs_miss_reason_known CHECK (miss_reason IN (
        'offline', 'throttled', 'brake', 'unknown', 'platform_unavailable', 'held',
        'host_clock')) NOT VALID;
"""

DOWNGRADE = """
ALTER TABLE runs
    DROP CONSTRAINT runs_miss_reason_known,
    ADD CONSTRAINT runs_miss_reason_known CHECK (miss_reason IN (
        'offline', 'throttled', 'brake', 'unknown', 'platform_unavailable', 'held')) NOT VALID;
DROP TABLE agent_clocks;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
