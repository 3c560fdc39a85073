"""A run's bookkeeping that is in no answer no longer makes every worker forget its agent's answers.

Revision ID: 0034_answer_neutral_run_writes
Revises: 0033 (see `down_revision`)

- `runs`: the trigger that notes a change of the run's agent in `answer_changes` now fires for an
  update only when it changes a column other than these, which no config or claim answer reads:
  - `notify_considered_at`, which the nightly review stamps on every finished run of a slot once
    it has decided the slot's notification (10,000 rows a night at 10,000 agents, each of which
    made every worker of every replica forget that agent's answers);
  - `delivery` and `patch_fallback_reason`, how the run's build came, written beside the outcome
    (whose own update of the status notes the change).
  The other columns are named one by one (a comparison of the whole row as JSON, as the agents'
  trigger does, costs several times more per row). A column added to `runs` later is not compared
  until a migration names it: a test compares the list with the table, so a new column is either
  named here or said to be in no answer.
- The update's trigger keeps its name and is replaced in place (`CREATE OR REPLACE TRIGGER`, which
  lets readers of `runs` go on while it waits for writers); the insert's and the delete's is a new
  one. Both are made in this revision's one transaction, so no write of a run goes unnoted in
  between. An insert or a delete of a run notes its agent as before.

Expand-only in effect: a replica of the previous release reads `answer_changes` as before and
finds fewer rows, none of them for a change it could see in an answer.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0033_window_closed_reason"

revision = "0034_answer_neutral_run_writes"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE OR REPLACE TRIGGER runs_answer_change AFTER UPDATE ON runs
    FOR EACH ROW WHEN (
        (OLD.id, OLD.agent_id, OLD.org_id, OLD.trigger, OLD.slot_key, OLD.slot_at, OLD.status,
         OLD.release_id, OLD.from_version, OLD.version, OLD.error, OLD.requested_by,
         OLD.created_at, OLD.claimed_at, OLD.finished_at, OLD.miss_reason, OLD.outcome_reason,
         OLD.switched_at, OLD.outcome_inferred, OLD.skip_reason)
        IS DISTINCT FROM
        (NEW.id, NEW.agent_id, NEW.org_id, NEW.trigger, NEW.slot_key, NEW.slot_at, NEW.status,
         NEW.release_id, NEW.from_version, NEW.version, NEW.error, NEW.requested_by,
         NEW.created_at, NEW.claimed_at, NEW.finished_at, NEW.miss_reason, NEW.outcome_reason,
         NEW.switched_at, NEW.outcome_inferred, NEW.skip_reason))
    EXECUTE FUNCTION note_answer_change('agent', 'agent_id');
CREATE TRIGGER runs_answer_change_added_or_gone AFTER INSERT OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('agent', 'agent_id');
"""

DOWNGRADE = """
DROP TRIGGER runs_answer_change_added_or_gone ON runs;
CREATE OR REPLACE TRIGGER runs_answer_change AFTER INSERT OR UPDATE OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('agent', 'agent_id');
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
