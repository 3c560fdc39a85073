"""A slot's scheduled runs side by side: the one-run-per-slot rule indexed slot first.

Revision ID: 0040_runs_slot_first
Revises: 0039_unreachable_retention

- `runs_slot_agent`: UNIQUE (slot_key, agent_id) WHERE trigger = 'schedule' — the same rule as
  `runs_one_per_slot` (agent_id, slot_key), its columns the other way round. The missed pass asks,
  for every agent due in a slot, whether the slot already has its run: through the agent-first
  index each answer is on a leaf page of that agent's own (after a year, a page per agent, mostly
  outside PostgreSQL's cache), through this one the whole slot is a few pages. A claim's insert
  checks both: the new one's pages are the night's, already in memory.

Expand-only: a new index, which a replica of the previous release does not name (its
`ON CONFLICT (agent_id, slot_key) WHERE trigger = 'schedule'` takes either as its arbiter).
`runs_one_per_slot` stays until a later release removes it in a contract step, once no replica
in service reads through it. Built inside the migration's transaction, so writers of `runs` wait
while it builds: under a second on a small install, about three on a year of 10,000 agents.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0039_unreachable_retention"

revision = "0040_runs_slot_first"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE UNIQUE INDEX runs_slot_agent ON runs (slot_key, agent_id) WHERE trigger = 'schedule';
"""

DOWNGRADE = """
DROP INDEX runs_slot_agent;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
