"""The panel's sign-in sessions, held server-side.

Revision ID: 0006_panel_sessions
Revises: 0005_reconcile_notifications

A browser holds only a random session secret in a cookie; the row holds its sha256, the credential
it was opened with, and when it ends. Held here rather than in a signed cookie so that every
replica sees the same sessions, signing out ends a session everywhere at once, and a session ends
with its credential: it is looked up joined to an unrevoked credential, and deleting the
credential deletes its sessions.
"""

from __future__ import annotations

from alembic import op

revision = "0006_panel_sessions"
down_revision: str | None = "0005_reconcile_notifications"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE panel_sessions (
    secret_sha256 text        PRIMARY KEY CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
    credential_id uuid        NOT NULL REFERENCES credentials (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    -- The absolute end; an idle session ends earlier (last_seen_at + the idle limit).
    expires_at    timestamptz NOT NULL,
    CHECK (expires_at > created_at),
    CHECK (last_seen_at >= created_at)
);
CREATE INDEX panel_sessions_by_credential ON panel_sessions (credential_id);
CREATE INDEX panel_sessions_by_expiry ON panel_sessions (expires_at);
"""

DOWNGRADE = """
DROP TABLE panel_sessions;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
