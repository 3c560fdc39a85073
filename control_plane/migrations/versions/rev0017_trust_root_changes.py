"""Publishing a trust root changes every agent's config answer; an agent saying which root it
holds changes none.

Revision ID: 0017_trust_root_changes
Revises: 0016 (see `down_revision`)

- `trust_roots`: any write notes a change of everything in `answer_changes` (the config answer
  names the newest version), so every worker forgets the answers it remembered.
- `agents`: the trigger that notes a change of one agent now ignores `trust_root_version` as it
  ignores the sightings: the agent reports it with its polls (in the sightings' own writes), and
  it is in no answer. Noting it would make each worker forget that agent's answers whenever the
  agent moves to a new root.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0016_trust_roots"

revision = "0017_trust_root_changes"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TRIGGER trust_roots_answer_change AFTER INSERT OR UPDATE OR DELETE ON trust_roots
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();
DROP TRIGGER agents_answer_change ON agents;
CREATE TRIGGER agents_answer_change AFTER UPDATE ON agents
    FOR EACH ROW WHEN (
        (to_jsonb(OLD) - 'last_seen_at' - 'online_since' - 'previous_seen_at'
                       - 'trust_root_version') IS DISTINCT FROM
        (to_jsonb(NEW) - 'last_seen_at' - 'online_since' - 'previous_seen_at'
                       - 'trust_root_version'))
    EXECUTE FUNCTION note_answer_change('agent', 'id');
"""

DOWNGRADE = """
DROP TRIGGER agents_answer_change ON agents;
CREATE TRIGGER agents_answer_change AFTER UPDATE ON agents
    FOR EACH ROW WHEN (
        (to_jsonb(OLD) - 'last_seen_at' - 'online_since' - 'previous_seen_at') IS DISTINCT FROM
        (to_jsonb(NEW) - 'last_seen_at' - 'online_since' - 'previous_seen_at'))
    EXECUTE FUNCTION note_answer_change('agent', 'id');
DROP TRIGGER trust_roots_answer_change ON trust_roots;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
