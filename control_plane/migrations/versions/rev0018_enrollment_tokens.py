"""Enrollment tokens: short-lived secrets a host exchanges once (or a few times) for an agent of
its own and that agent's credential.

Revision ID: 0018_enrollment_tokens
Revises: 0017 (see `down_revision`)

- `enrollment_tokens`: an organisation's token, stored only as the sha256 of its secret, with its
  expiry (at most 30 days after it was made), its number of uses (1 to 10,000) and how many are
  spent, an optional shell-style pattern the requested agent name must match, an optional label,
  who made it and who revoked it. The bounds are written out here (a migration is frozen); the
  service's constants are compared with them by a test.
- `enrollment_counts`: every exchange counted as it happens by its result (an agent enrolled, or
  the refusal's code), one row per result from the start at 0, so `/metrics` reads six rows
  however many hosts ever enrolled.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0017_trust_root_changes"

revision = "0018_enrollment_tokens"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE enrollment_tokens (
    id              uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id          uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    secret_sha256   text        NOT NULL UNIQUE CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
    label           text        CHECK (label IS NULL
                                       OR (length(btrim(label)) > 0 AND length(label) <= 200)),
    name_pattern    text        CHECK (name_pattern IS NULL
                                       OR (length(btrim(name_pattern)) > 0
                                           AND length(name_pattern) <= 200)),
    uses_allowed    integer     NOT NULL CHECK (uses_allowed BETWEEN 1 AND 10000),
    uses            integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL,
    expires_at      timestamptz NOT NULL,
    created_by_kind text        NOT NULL CHECK (created_by_kind IN ('user', 'operator')),
    created_by_id   uuid,
    created_by_name text,
    revoked_at      timestamptz,
    revoked_by_name text,
    last_used_at    timestamptz,
    CONSTRAINT enrollment_tokens_uses_within CHECK (uses BETWEEN 0 AND uses_allowed),
    CONSTRAINT enrollment_tokens_expiry_within CHECK (
        expires_at > created_at AND expires_at <= created_at + interval '30 days'
    ),
    CONSTRAINT enrollment_tokens_revoked_after_created CHECK (
        revoked_at IS NULL OR revoked_at >= created_at
    )
);
CREATE INDEX enrollment_tokens_by_org ON enrollment_tokens (org_id, created_at DESC);

CREATE TABLE enrollment_counts (
    result text   PRIMARY KEY CHECK (result IN ('enrolled', 'enrollment_token_refused',
                                                'enrollment_token_expired',
                                                'enrollment_token_used_up',
                                                'agent_name_not_allowed', 'agent_exists')),
    n      bigint NOT NULL DEFAULT 0 CHECK (n >= 0)
);
INSERT INTO enrollment_counts (result) VALUES ('enrolled'), ('enrollment_token_refused'),
    ('enrollment_token_expired'), ('enrollment_token_used_up'), ('agent_name_not_allowed'),
    ('agent_exists');
"""

DOWNGRADE = """
DROP TABLE enrollment_counts;
DROP TABLE enrollment_tokens;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
