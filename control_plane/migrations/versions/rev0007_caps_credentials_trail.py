"""Sane caps, a reason for the brake, named credentials with a lifecycle, deleted agents that keep
their history, the hosts answering for an agent, and the operators' trail.

Revision ID: 0007_caps_credentials_trail
Revises: 0006_panel_sessions

- Caps are at least 1 and the organisation's cap is at most the global one (`ground.limits`):
  a cap of 0 halted every update without a word, which is what the brake (with its reason) is
  for. A database that holds a 0 gets the brake engaged with a reason saying so, then caps of 1,
  so the migration itself never starts updates the operators had stopped.
- An engaged brake has a reason.
- Every credential carries the name of the person or system holding it; a rotation names its
  successor. Existing rows take their label, else their agent's name, else the audience.
- A deleted agent keeps its row (runs, events and the trail point at it) with `deleted_at`, and its
  name becomes free for a new enrolment.
- `agent_hosts`: every host id an agent credential was presented from, to show one identity
  answered by two hosts.
- Events without an organisation (the operators' platform actions), with the name of the actor's
  credential as it was when it acted.
"""

from __future__ import annotations

from alembic import op

revision = "0007_caps_credentials_trail"
down_revision: str | None = "0006_panel_sessions"
branch_labels = None
depends_on = None

UPGRADE = r"""
UPDATE platform_brake
   SET engaged = true, changed_at = now(),
       reason = 'a cap was 0 before migration 0006: caps are now at least 1, '
                || 'and the brake stops updates'
 WHERE NOT engaged AND EXISTS (SELECT 1 FROM platform_settings WHERE org_cap = 0 OR global_cap = 0);
UPDATE platform_settings SET org_cap = greatest(org_cap, 1), global_cap = greatest(global_cap, 1);
-- No organisation could get more than the global cap anyway: the same behaviour, stated honestly.
UPDATE platform_settings SET org_cap = global_cap WHERE org_cap > global_cap;
ALTER TABLE platform_settings
    DROP CONSTRAINT platform_settings_org_cap_check,
    DROP CONSTRAINT platform_settings_global_cap_check,
    ADD CONSTRAINT platform_settings_org_cap_check CHECK (org_cap >= 1),
    ADD CONSTRAINT platform_settings_global_cap_check CHECK (global_cap >= 1),
    ADD CONSTRAINT platform_settings_org_cap_within_global CHECK (org_cap <= global_cap);

UPDATE platform_brake SET reason = 'no reason was recorded'
 WHERE engaged AND (reason IS NULL OR btrim(reason) = '');
-- coalesce: a NULL reason makes the length unknown, and a CHECK lets unknown through.
ALTER TABLE platform_brake
    ADD CONSTRAINT platform_brake_engaged_has_reason
        CHECK (NOT engaged OR coalesce(length(btrim(reason)), 0) > 0);

ALTER TABLE credentials
    ADD COLUMN name        text,
    ADD COLUMN replaced_by uuid REFERENCES credentials (id) ON DELETE SET NULL;
UPDATE credentials c
   SET name = coalesce(nullif(btrim(c.label), ''),
                       (SELECT a.name FROM agents a WHERE a.id = c.agent_id),
                       c.audience || ' key');
ALTER TABLE credentials
    ALTER COLUMN name SET NOT NULL,
    ADD CONSTRAINT credentials_name_not_blank CHECK (length(btrim(name)) > 0);
CREATE INDEX credentials_by_org ON credentials (org_id, audience);

ALTER TABLE agents ADD COLUMN deleted_at timestamptz;
ALTER TABLE agents DROP CONSTRAINT agents_org_id_name_key;
CREATE UNIQUE INDEX agents_live_name ON agents (org_id, name) WHERE deleted_at IS NULL;

CREATE TABLE agent_hosts (
    agent_id      uuid        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    host_id       text        NOT NULL CHECK (host_id ~ '^[A-Za-z0-9_-]{8,64}$'),
    first_seen_at timestamptz NOT NULL,
    last_seen_at  timestamptz NOT NULL,
    PRIMARY KEY (agent_id, host_id)
);

ALTER TABLE events
    ALTER COLUMN org_id DROP NOT NULL,
    ADD COLUMN actor_name text;
CREATE INDEX events_at ON events (at DESC, id DESC);
"""

DOWNGRADE = r"""
DROP INDEX events_at;
DELETE FROM events WHERE org_id IS NULL;
ALTER TABLE events
    DROP COLUMN actor_name,
    ALTER COLUMN org_id SET NOT NULL;

DROP TABLE agent_hosts;

DROP INDEX agents_live_name;
DELETE FROM agents WHERE deleted_at IS NOT NULL;
ALTER TABLE agents ADD CONSTRAINT agents_org_id_name_key UNIQUE (org_id, name);
ALTER TABLE agents DROP COLUMN deleted_at;

DROP INDEX credentials_by_org;
ALTER TABLE credentials
    DROP CONSTRAINT credentials_name_not_blank,
    DROP COLUMN replaced_by,
    DROP COLUMN name;

ALTER TABLE platform_brake DROP CONSTRAINT platform_brake_engaged_has_reason;

ALTER TABLE platform_settings
    DROP CONSTRAINT platform_settings_org_cap_within_global,
    DROP CONSTRAINT platform_settings_global_cap_check,
    DROP CONSTRAINT platform_settings_org_cap_check,
    ADD CONSTRAINT platform_settings_org_cap_check CHECK (org_cap >= 0),
    ADD CONSTRAINT platform_settings_global_cap_check CHECK (global_cap >= 0);
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
