"""Organisations, agents and the three audiences' credentials.

Revision ID: 0001_orgs_agents_credentials
Revises: (none)
"""

from __future__ import annotations

from alembic import op

revision = "0001_orgs_agents_credentials"
down_revision: str | None = None
branch_labels = None
depends_on = None


UPGRADE = """
CREATE TABLE orgs (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name       text        NOT NULL CHECK (length(btrim(name)) > 0),
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE agents (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id          uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    name            text        NOT NULL CHECK (length(btrim(name)) > 0),
    created_at      timestamptz NOT NULL DEFAULT now(),
    current_version text,
    last_seen_at    timestamptz,
    UNIQUE (org_id, name)
);

-- One table for the three audiences: the secret itself is never stored, only its sha256, and the
-- scope columns must match the audience (an agent credential names its agent and organisation,
-- a panel credential its organisation, an operator credential neither).
CREATE TABLE credentials (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    audience      text        NOT NULL CHECK (audience IN ('agent', 'panel', 'operator')),
    secret_sha256 text        NOT NULL UNIQUE CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
    org_id        uuid        REFERENCES orgs (id) ON DELETE CASCADE,
    agent_id      uuid        REFERENCES agents (id) ON DELETE CASCADE,
    label         text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    CONSTRAINT credentials_scope_matches_audience CHECK (
        (audience = 'agent' AND org_id IS NOT NULL AND agent_id IS NOT NULL)
        OR (audience = 'panel' AND org_id IS NOT NULL AND agent_id IS NULL)
        OR (audience = 'operator' AND org_id IS NULL AND agent_id IS NULL)
    )
);
"""

DOWNGRADE = """
DROP TABLE credentials;
DROP TABLE agents;
DROP TABLE orgs;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
