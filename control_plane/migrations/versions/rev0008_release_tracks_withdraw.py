"""One current release per (channel, platform), and withdrawn releases.

Revision ID: 0008_release_tracks_withdraw
Revises: 0007_caps_credentials_trail

- `manifest_version` is unique per (channel, platform), not platform-wide: each pair is its own
  sequence, as each agent's rollback floor is (an agent follows one pair).
- Channel and platform are the manifest's names (`ground.limits.RELEASE_NAME_PATTERN`).
- `current_releases`: the release each pair is offered, one row per pair. Publishing moves it
  forward; withdrawing moves it to the previous release of the pair or to the one the operator
  names. A pointer, not "the newest that is not withdrawn", because a named replacement may be
  older than the newest release left. Claims read it `FOR SHARE`, so a withdrawal waits for the
  grants in flight and the tokens it then revokes include theirs.
- A withdrawn release keeps its row (runs and tokens point at it) with when, why and by whom.
  Existing databases start with each pair's newest release current.
"""

from __future__ import annotations

from alembic import op

revision = "0008_release_tracks_withdraw"
down_revision: str | None = "0007_caps_credentials_trail"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE releases
    DROP CONSTRAINT releases_manifest_version_key,
    ADD CONSTRAINT releases_one_manifest_version_per_pair
        UNIQUE (channel, platform, manifest_version),
    ADD CONSTRAINT releases_channel_is_a_name CHECK (channel ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    ADD CONSTRAINT releases_platform_is_a_name CHECK (platform ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    ADD COLUMN withdrawn_at     timestamptz,
    ADD COLUMN withdrawn_reason text,
    ADD COLUMN withdrawn_by     text,
    ADD CONSTRAINT releases_withdrawn_has_reason
        CHECK (withdrawn_at IS NULL OR coalesce(length(btrim(withdrawn_reason)), 0) > 0);

CREATE TABLE current_releases (
    channel    text        NOT NULL,
    platform   text        NOT NULL,
    release_id uuid        REFERENCES releases (id),
    changed_at timestamptz NOT NULL,
    PRIMARY KEY (channel, platform)
);

INSERT INTO current_releases (channel, platform, release_id, changed_at)
SELECT DISTINCT ON (channel, platform) channel, platform, id, published_at
  FROM releases
 ORDER BY channel, platform, manifest_version DESC;

-- "Which agents run a withdrawn version": each agent's latest run that reported a version.
CREATE INDEX runs_agent_latest_version ON runs (agent_id, created_at DESC)
    WHERE version IS NOT NULL;
"""

DOWNGRADE = """
DROP INDEX runs_agent_latest_version;
DROP TABLE current_releases;
ALTER TABLE releases
    DROP CONSTRAINT releases_withdrawn_has_reason,
    DROP COLUMN withdrawn_by,
    DROP COLUMN withdrawn_reason,
    DROP COLUMN withdrawn_at,
    DROP CONSTRAINT releases_platform_is_a_name,
    DROP CONSTRAINT releases_channel_is_a_name,
    DROP CONSTRAINT releases_one_manifest_version_per_pair,
    ADD CONSTRAINT releases_manifest_version_key UNIQUE (manifest_version);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
