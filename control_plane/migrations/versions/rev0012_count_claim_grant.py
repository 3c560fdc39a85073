"""A grant counted in both caps by one function that fails when a cap is full.

Revision ID: 0012_count_claim_grant
Revises: 0011 (see `down_revision`)

- `count_claim_grant(round, org, org_cap, cap)`: the organisation's counter, then the
  platform's, each `granted = granted + 1 … WHERE granted < cap` under the row's lock (the
  platform's only when the organisation's had room); returns both new counts, or raises
  SQLSTATE `NW429` with the message `org_cap` or `global_cap` when a cap is full.
- Why an error and not an empty answer: a grant sends its COMMIT together with this call
  (`control_plane.claims.services`), so the round's counter rows are held for no round trip of
  the client's; a full cap must then abort the transaction by itself, the COMMIT turning into a
  rollback.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0011_answer_changes"

revision = "0012_count_claim_grant"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE FUNCTION count_claim_grant(
    p_round timestamptz, p_org uuid, p_org_cap integer, p_cap integer,
    OUT org_granted integer, OUT global_granted integer
) LANGUAGE plpgsql AS $$
BEGIN
    UPDATE claim_rounds_org SET granted = granted + 1
     WHERE round_start = p_round AND org_id = p_org AND granted < p_org_cap
    RETURNING granted INTO org_granted;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'NW429', MESSAGE = 'org_cap';
    END IF;
    UPDATE claim_rounds_global SET granted = granted + 1
     WHERE round_start = p_round AND granted < p_cap
    RETURNING granted INTO global_granted;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'NW429', MESSAGE = 'global_cap';
    END IF;
END
$$;
"""

DOWNGRADE = """
DROP FUNCTION count_claim_grant(timestamptz, uuid, integer, integer);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
