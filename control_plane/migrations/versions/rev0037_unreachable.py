"""An agent that tried through a slot's window and could not reach the control plane says so, and
the miss gets a reason of its own.

Revision ID: 0037_unreachable
Revises: 0036 (see `down_revision`)

- `unreachable_reports`: per agent and slot, what the agent said once it reached the control
  plane again (`UnreachableReport`): the first error's text (plain, at most 500 characters, as
  `ground.limits.MAX_UNREACHABLE_ERROR_LENGTH` says), its first and last try and how many, and
  when it said it. One row per slot: the first report is kept, a repeated one changes nothing.
- `runs.miss_reason` may also be `unreachable`: the agent was running and tried inside the window,
  and could not reach the control plane (it replaces `offline` only).

Expand-only: a new table, and the CHECK made again under its own name, wider, NOT VALID (no row
is scanned; every row holds one of the narrower list's values). A replica of the previous release
never writes the new value, and reads it back as text it does not know ("reason unknown").
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0036_host_clock"

revision = "0037_unreachable"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE unreachable_reports (
    agent_id        uuid        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    slot_key        text        NOT NULL,
    slot_at         timestamptz NOT NULL,
    error           text        NOT NULL CHECK (length(error) BETWEEN 1 AND 500),
    first_tried_at  timestamptz NOT NULL,
    last_tried_at   timestamptz NOT NULL,
    attempts        integer     NOT NULL CHECK (attempts >= 1),
    reported_at     timestamptz NOT NULL,
    PRIMARY KEY (agent_id, slot_key),
    CHECK (first_tried_at <= last_tried_at)
);
ALTER TABLE runs
    DROP CONSTRAINT runs_miss_reason_known,
    ADD CONSTRAINT runs_miss_reason_known CHECK (miss_reason IN (
        'offline', 'throttled', 'brake', 'unknown', 'platform_unavailable', 'held',
        'host_clock', 'unreachable')) NOT VALID;
"""

DOWNGRADE = """
ALTER TABLE runs
    DROP CONSTRAINT runs_miss_reason_known,
    ADD CONSTRAINT runs_miss_reason_known CHECK (miss_reason IN (
        'offline', 'throttled', 'brake', 'unknown', 'platform_unavailable', 'held',
        'host_clock')) NOT VALID;
DROP TABLE unreachable_reports;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
