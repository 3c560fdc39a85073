"""Each agent's offer kept as its inputs change; the run that set what an agent runs.

Revision ID: 0023_kept_offers
Revises: 0022 (see `down_revision`)

- `agents.current_version_run_at`: the `created_at` of the run whose report set
  `current_version`. A report of an older run (one that arrives late) leaves the version alone.
  NULL (every row at first, and any set by a replica of an earlier release): any report moves it.
- `agent_offers`: per live agent, the result of the offer rule for the pair it follows: the
  pair, the release offered (NULL: none), why (`basis`, NULL: nothing offered) and the first wave
  of the pair's current release that reaches it (NULL: the pair has none). Written only by the
  control plane's refresh, which computes it with the same rule the claim uses.
- `agent_offers_stale`: the agents whose kept offer may no longer be exact. Triggers add them
  in the transaction of every write that can change an offer: per agent — the agent itself
  (enrolment, removal, moving organisation, what it runs), the pair it follows (`agent_tracks`),
  its pin and canary mark; per organisation — its pin and canary mark (every agent of it); for
  every live agent — releases (published, promoted, withdrawn, its version or order), the
  pairs' current releases and the plan of waves. The refresh empties it before a fleet view is
  read, recomputing only those agents. Halts, brakes and holds are not kept: they are read with
  the views (a hold ends at a time, so it is judged at the reader's `now`).
- Every live agent starts stale: the first read after this migration computes them all.

Expand-only: a column without a default, two new tables, functions and triggers. A replica of
the previous release reads none of them; its writes fire the triggers all the same, so the kept
offers stay exact during a rolling upgrade. The triggers on `agents` fire only when `org_id`,
`deleted_at` or `current_version` change (not on the poll's `last_seen_at`), the one on
`agent_tracks` only when the pair changes.
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0022_org_default_schedule"

revision = "0023_kept_offers"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE agents ADD COLUMN current_version_run_at timestamptz;

CREATE TABLE agent_offers (
    agent_id   uuid    PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    channel    text    NOT NULL,
    platform   text    NOT NULL,
    release_id uuid,
    basis      text    CHECK (basis IN ('pinned', 'current', 'canary', 'previous')),
    wave       integer,
    CHECK (release_id IS NULL OR basis IS NOT NULL)
);

CREATE TABLE agent_offers_stale (
    agent_id uuid PRIMARY KEY
);

-- Per row: TG_ARGV[0] is `agent` or `org`, TG_ARGV[1] the column naming it; the old row's and
-- the new row's subjects are both marked (a pin moved from one agent to another changes both).
CREATE FUNCTION mark_offers_stale() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    subject uuid;
BEGIN
    FOR subject IN
        SELECT DISTINCT s FROM unnest(ARRAY[
            CASE WHEN TG_OP <> 'INSERT' THEN (to_jsonb(OLD) ->> TG_ARGV[1])::uuid END,
            CASE WHEN TG_OP <> 'DELETE' THEN (to_jsonb(NEW) ->> TG_ARGV[1])::uuid END]) AS s
         WHERE s IS NOT NULL
    LOOP
        IF TG_ARGV[0] = 'agent' THEN
            INSERT INTO agent_offers_stale (agent_id) VALUES (subject) ON CONFLICT DO NOTHING;
        ELSE
            INSERT INTO agent_offers_stale (agent_id)
                SELECT id FROM agents WHERE org_id = subject AND deleted_at IS NULL
                ON CONFLICT DO NOTHING;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE FUNCTION mark_all_offers_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agent_offers_stale (agent_id)
        SELECT id FROM agents WHERE deleted_at IS NULL ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

CREATE TRIGGER agents_offer_enrolled AFTER INSERT ON agents
    FOR EACH ROW EXECUTE FUNCTION mark_offers_stale('agent', 'id');
CREATE TRIGGER agents_offer_changed AFTER UPDATE ON agents
    FOR EACH ROW WHEN ((OLD.org_id, OLD.deleted_at, OLD.current_version)
                       IS DISTINCT FROM (NEW.org_id, NEW.deleted_at, NEW.current_version))
    EXECUTE FUNCTION mark_offers_stale('agent', 'id');
CREATE TRIGGER agent_tracks_offer_added AFTER INSERT OR DELETE ON agent_tracks
    FOR EACH ROW EXECUTE FUNCTION mark_offers_stale('agent', 'agent_id');
CREATE TRIGGER agent_tracks_offer_changed AFTER UPDATE ON agent_tracks
    FOR EACH ROW WHEN ((OLD.agent_id, OLD.channel, OLD.platform)
                       IS DISTINCT FROM (NEW.agent_id, NEW.channel, NEW.platform))
    EXECUTE FUNCTION mark_offers_stale('agent', 'agent_id');
CREATE TRIGGER pins_offer_agent AFTER INSERT OR UPDATE OR DELETE ON pins
    FOR EACH ROW EXECUTE FUNCTION mark_offers_stale('agent', 'agent_id');
CREATE TRIGGER pins_offer_org AFTER INSERT OR UPDATE OR DELETE ON pins
    FOR EACH ROW EXECUTE FUNCTION mark_offers_stale('org', 'org_id');
CREATE TRIGGER canary_agents_offer AFTER INSERT OR UPDATE OR DELETE ON canary_agents
    FOR EACH ROW EXECUTE FUNCTION mark_offers_stale('agent', 'agent_id');
CREATE TRIGGER canary_orgs_offer AFTER INSERT OR UPDATE OR DELETE ON canary_orgs
    FOR EACH ROW EXECUTE FUNCTION mark_offers_stale('org', 'org_id');

-- A release's brake (`braked_at`, `brake_reason`) and its halts are read with the views.
CREATE TRIGGER releases_offer_added AFTER INSERT OR DELETE ON releases
    FOR EACH STATEMENT EXECUTE FUNCTION mark_all_offers_stale();
CREATE TRIGGER releases_offer_changed
    AFTER UPDATE OF channel, platform, agent_version, manifest_version, stage, wave,
                    withdrawn_at ON releases
    FOR EACH STATEMENT EXECUTE FUNCTION mark_all_offers_stale();
CREATE TRIGGER current_releases_offer AFTER INSERT OR UPDATE OR DELETE ON current_releases
    FOR EACH STATEMENT EXECUTE FUNCTION mark_all_offers_stale();
CREATE TRIGGER rollout_waves_offer AFTER INSERT OR UPDATE OR DELETE ON rollout_waves
    FOR EACH STATEMENT EXECUTE FUNCTION mark_all_offers_stale();

INSERT INTO agent_offers_stale (agent_id) SELECT id FROM agents WHERE deleted_at IS NULL;
"""

DOWNGRADE = """
DROP TRIGGER rollout_waves_offer ON rollout_waves;
DROP TRIGGER current_releases_offer ON current_releases;
DROP TRIGGER releases_offer_changed ON releases;
DROP TRIGGER releases_offer_added ON releases;
DROP TRIGGER canary_orgs_offer ON canary_orgs;
DROP TRIGGER canary_agents_offer ON canary_agents;
DROP TRIGGER pins_offer_org ON pins;
DROP TRIGGER pins_offer_agent ON pins;
DROP TRIGGER agent_tracks_offer_changed ON agent_tracks;
DROP TRIGGER agent_tracks_offer_added ON agent_tracks;
DROP TRIGGER agents_offer_changed ON agents;
DROP TRIGGER agents_offer_enrolled ON agents;
DROP FUNCTION mark_all_offers_stale();
DROP FUNCTION mark_offers_stale();
DROP TABLE agent_offers_stale;
DROP TABLE agent_offers;
ALTER TABLE agents DROP COLUMN current_version_run_at;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
