"""One live person per address under the rule sign-in matches addresses by.

Revision ID: 0042_people_address_key
Revises: 0041_sign_in_failures

- `people_live_address`: a unique index on `lower(email COLLATE "C")` of the live people: the
  address with its ASCII letters A-Z folded to a-z and every other character as typed, the rule
  sign-in, a provider's verified address and the sign-in lock all match an address by. Under the
  "C" collation `lower()` folds A-Z and nothing else, whatever the database's own collation, so
  no two live people can share an address under that rule (the index `people_live_email`, on
  `lower(email)` under the database's collation, could let two through: under a Turkish one
  `I` and `i` are two letters).

Expand-only: a new index. `people_live_email` stays: a replica of the previous release still
matches addresses by it until it is upgraded; a later release removes it in a contract step.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0041_sign_in_failures"

revision = "0042_people_address_key"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE UNIQUE INDEX people_live_address ON people (lower(email COLLATE "C"))
    WHERE removed_at IS NULL;
"""

DOWNGRADE = """
DROP INDEX people_live_address;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
