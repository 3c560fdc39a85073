"""A write that changes an agent's offer always leaves a mark a running refresh cannot take.

Revision ID: 0035_offer_marks
Revises: 0034 (see `down_revision`)

- `agent_offer_marks`: the agents whose kept offer may no longer be exact, one row per write, with
  no key. The marks in `agent_offers_stale` are one per agent (`ON CONFLICT DO NOTHING`): a write
  that found its agent already marked added nothing, and when a refresh took that mark and read
  the facts before the write committed, the agent's kept offer stayed as it was before the write,
  with no mark left to correct it. A row here is added by every write, and a refresh only ever
  takes the rows committed when it starts, so a write that commits later is computed again by the
  next refresh.
- The two mark functions write both tables.

Expand-only: a new table, and the two functions made again under their own names, writing what
they wrote before and one row more. A replica of the previous release refreshes from
`agent_offers_stale` as before (the marks it leaves here are taken by this release's refresh).
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0034_answer_neutral_run_writes"

revision = "0035_offer_marks"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE agent_offer_marks (
    agent_id uuid NOT NULL
);

CREATE OR REPLACE FUNCTION mark_offers_stale() RETURNS trigger LANGUAGE plpgsql AS $$
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
            INSERT INTO agent_offer_marks (agent_id) VALUES (subject);
        ELSE
            INSERT INTO agent_offers_stale (agent_id)
                SELECT id FROM agents WHERE org_id = subject AND deleted_at IS NULL
                ON CONFLICT DO NOTHING;
            INSERT INTO agent_offer_marks (agent_id)
                SELECT id FROM agents WHERE org_id = subject AND deleted_at IS NULL;
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION mark_all_offers_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agent_offers_stale (agent_id)
        SELECT id FROM agents WHERE deleted_at IS NULL ON CONFLICT DO NOTHING;
    INSERT INTO agent_offer_marks (agent_id) SELECT id FROM agents WHERE deleted_at IS NULL;
    RETURN NULL;
END
$$;
"""

DOWNGRADE = """
CREATE OR REPLACE FUNCTION mark_offers_stale() RETURNS trigger LANGUAGE plpgsql AS $$
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

CREATE OR REPLACE FUNCTION mark_all_offers_stale() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO agent_offers_stale (agent_id)
        SELECT id FROM agents WHERE deleted_at IS NULL ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;

DROP TABLE agent_offer_marks;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
