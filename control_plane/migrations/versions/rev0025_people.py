"""Named people who sign in to the panel as themselves.

Revision ID: 0025_people
Revises: 0024 (see `down_revision`)

- `people`: a person of an organisation, with a role (viewer or editor), or an operator (no
  organisation, the role `operator`), with a password hash
  (scrypt, its parameters in the stored string), a TOTP secret and the last time step a code was
  accepted at (so a code is never accepted twice), and the failed attempts that lock sign-in
  for a while. The e-mail address is a label and the sign-in name: one live person per address.
- `invitations`: a link's token, stored as its sha256, single use, with its expiry.
- `person_sessions`: the sessions people open, beside the key sessions (`panel_sessions`), which
  stay as they are: a row is pending until its second factor is given (`verified_at`).
- `oidc_providers`: an organisation's own OpenID Connect provider (issuer, client id, client
  secret); the secret is stored as a webhook's secret is, since it must be sent to the provider.

Expand-only: new tables and their indexes. A replica of the previous release reads none of them;
a person's session is simply unknown to it (its reader is asked to sign in again there).
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0024_history_pages"

revision = "0025_people"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE people (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    -- NULL for an operator: operators belong to the platform, not to an organisation.
    org_id           uuid        REFERENCES orgs (id) ON DELETE CASCADE,
    name             text        NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    email            text        NOT NULL CHECK (length(email) BETWEEN 3 AND 320),
    role             text        NOT NULL CHECK (role IN ('viewer', 'editor', 'operator')),
    password_hash    text,
    totp_secret      text,
    totp_confirmed   boolean     NOT NULL DEFAULT false,
    totp_last_step   bigint,
    failed_attempts  integer     NOT NULL DEFAULT 0 CHECK (failed_attempts >= 0),
    locked_until     timestamptz,
    oidc_subject     text,
    created_at       timestamptz NOT NULL,
    invited_by       text,
    removed_at       timestamptz,
    CHECK (NOT totp_confirmed OR totp_secret IS NOT NULL),
    CHECK ((org_id IS NULL) = (role = 'operator'))
);
CREATE UNIQUE INDEX people_live_email ON people (lower(email)) WHERE removed_at IS NULL;
CREATE INDEX people_by_org ON people (org_id, created_at);
CREATE UNIQUE INDEX people_oidc_subject ON people (org_id, oidc_subject)
    WHERE oidc_subject IS NOT NULL AND removed_at IS NULL;

CREATE TABLE invitations (
    token_sha256 text        PRIMARY KEY CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    person_id    uuid        NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz,
    CHECK (expires_at > created_at)
);
CREATE INDEX invitations_by_person ON invitations (person_id);

CREATE TABLE person_sessions (
    secret_sha256 text        PRIMARY KEY CHECK (secret_sha256 ~ '^[0-9a-f]{64}$'),
    person_id     uuid        NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    created_at    timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    -- NULL while the second factor (a TOTP code, or the provider's word) is still owed.
    verified_at   timestamptz,
    CHECK (expires_at > created_at),
    CHECK (last_seen_at >= created_at)
);
CREATE INDEX person_sessions_by_person ON person_sessions (person_id);
CREATE INDEX person_sessions_by_expiry ON person_sessions (expires_at);

CREATE TABLE oidc_providers (
    org_id        uuid        PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    issuer        text        NOT NULL CHECK (issuer ~ '^https?://'),
    client_id     text        NOT NULL CHECK (length(client_id) BETWEEN 1 AND 500),
    client_secret text        NOT NULL CHECK (length(client_secret) BETWEEN 1 AND 500),
    updated_at    timestamptz NOT NULL
);
"""

DOWNGRADE = """
DROP TABLE oidc_providers;
DROP TABLE person_sessions;
DROP TABLE invitations;
DROP TABLE people;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
