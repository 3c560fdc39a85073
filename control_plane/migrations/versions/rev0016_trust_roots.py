"""The trust roots operators publish, and the one each agent holds.

Revision ID: 0016_trust_roots
Revises: 0015 (see `down_revision`)

- `trust_roots`: every root published, by version, with its exact bytes (what agents fetch and
  verify; the control plane holds no key and cannot make one) and its expiry. Versions are never
  changed or deleted: an agent may walk the chain from any of them.
- `agents.trust_root_version`: the version the agent last said it holds (NULL: it has not said,
  an agent from before trust roots or one still on its trusted-key files).
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0015_offer_halted_skips"

revision = "0016_trust_roots"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE trust_roots (
    version integer PRIMARY KEY CHECK (version >= 1),
    body bytea NOT NULL CHECK (octet_length(body) <= 524288),
    expires_at timestamptz NOT NULL,
    published_at timestamptz NOT NULL,
    published_by text NOT NULL
);
ALTER TABLE agents ADD COLUMN trust_root_version integer CHECK (trust_root_version >= 1);
"""

DOWNGRADE = """
ALTER TABLE agents DROP COLUMN trust_root_version;
DROP TABLE trust_roots;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
