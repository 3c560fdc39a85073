"""The panel's forms that show a secret once, each form's one-use token taken on the server.

Revision ID: 0043_panel_sent_forms
Revises: 0042_people_address_key

- `panel_sent_forms`: one row per one-use form token (a random value the panel put in the page,
  no secret) taken by a sending of its form, when, and whether its secret was made. The sending
  that inserts the row makes the secret (and removes the row again when the form is refused); a
  second sending of the same form finds the row and waits for `made` or for the row to go: exactly
  one secret is made, on every replica, and no connection is held while it is made. A row older
  than a panel session's 12 hours is useless (its form can no longer be sent) and is removed as
  new ones are taken.

Expand-only: a new table and its index.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0042_people_address_key"

revision = "0043_panel_sent_forms"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE panel_sent_forms (
    token   text        PRIMARY KEY CHECK (token ~ '^[A-Za-z0-9_-]{20,64}$'),
    sent_at timestamptz NOT NULL,
    made    boolean     NOT NULL DEFAULT false
);
CREATE INDEX panel_sent_forms_by_sent_at ON panel_sent_forms (sent_at);
"""

DOWNGRADE = """
DROP TABLE panel_sent_forms;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
