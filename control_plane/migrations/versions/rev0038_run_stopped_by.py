"""A slot skipped for a stopped release says what stopped it: a halt or the release's own brake.

Revision ID: 0038_run_stopped_by
Revises: 0037_unreachable

- `runs.stopped_by`: for a run `skipped` with reason `release_halted`, `halt` when the release
  was halted (by an operator or on its failures) and `brake` when it was under its own brake when
  the slot was consumed; NULL on every other run and on the runs recorded before. The two are
  undone differently (a halt is resumed, a brake released), and the agent is answered
  `release_halted` either way. Written only by the insert of the skipped run (which notes its
  agent's change, `rev0034`); no config or claim answer reads it, so the update trigger does not
  compare it.

Expand-only: a new nullable column without a default (no row is rewritten), and its CHECK added
NOT VALID (no row is scanned; every row holds NULL). A replica of the previous release names its
columns when it writes a run, so it writes NULL, which reads as before ("halted, or paused by its
own brake").
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0037_unreachable"

revision = "0038_run_stopped_by"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
ALTER TABLE runs ADD COLUMN stopped_by text;
ALTER TABLE runs
    ADD CONSTRAINT runs_stopped_by_known CHECK (stopped_by IN ('halt', 'brake')) NOT VALID;
"""

DOWNGRADE = """
ALTER TABLE runs DROP COLUMN stopped_by;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
