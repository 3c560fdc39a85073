"""A rollout in waves: the plan of waves, each release's wave, canary organisations.

Revision ID: 0014_waves_plan
Revises: 0013 (see `down_revision`)

- `rollout_waves`: the ordered plan every release follows, one row per wave (`position` 1…10).
  A wave reaches a share of the pair's agents (`share_percent`) and, with `canaries`, the agents
  and organisations an operator marked as canaries. Its own soak time and halt threshold are
  NULL when it follows the rollout settings. The default plan: canaries (the named ones and the
  share the settings held as `canary_share_percent`) → 10 % → 50 % → everyone.
- `releases.wave`: the position of the wave a release in the `canary` stage is in; a release at
  `everyone` is in the plan's last wave whatever this says.
- `canary_orgs`: organisations an operator marked as canaries: all their agents are in every
  wave that takes the canaries.
- Both new tables change offers: `rollout_waves` everyone's, `canary_orgs` one organisation's.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0013_evidence_outcome_counts"

revision = "0014_waves_plan"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE rollout_waves (
    position          integer PRIMARY KEY CHECK (position BETWEEN 1 AND 10),
    share_percent     integer NOT NULL CHECK (share_percent BETWEEN 0 AND 100),
    canaries          boolean NOT NULL DEFAULT false,
    soak_minutes      integer CHECK (soak_minutes BETWEEN 0 AND 20160),
    halt_failures     integer CHECK (halt_failures BETWEEN 1 AND 100000),
    halt_rate_percent integer CHECK (halt_rate_percent BETWEEN 1 AND 100)
);
INSERT INTO rollout_waves (position, share_percent, canaries)
SELECT 1, canary_share_percent, true FROM rollout_settings;
INSERT INTO rollout_waves (position, share_percent) VALUES (2, 10), (3, 50), (4, 100);

ALTER TABLE releases
    ADD COLUMN wave integer NOT NULL DEFAULT 1 CONSTRAINT releases_wave_known
        CHECK (wave BETWEEN 1 AND 10);

CREATE TABLE canary_orgs (
    org_id    uuid        PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    marked_at timestamptz NOT NULL,
    marked_by text        NOT NULL
);

CREATE TRIGGER rollout_waves_answer_change_all AFTER INSERT OR UPDATE OR DELETE ON rollout_waves
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();
CREATE TRIGGER canary_orgs_answer_change_org AFTER INSERT OR UPDATE OR DELETE ON canary_orgs
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('org', 'org_id');
"""

DOWNGRADE = """
DROP TABLE canary_orgs;
ALTER TABLE releases DROP COLUMN wave;
DROP TABLE rollout_waves;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
