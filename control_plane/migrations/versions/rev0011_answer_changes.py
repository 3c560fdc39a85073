"""The feed that lets every worker of every replica answer the agents' two calls from memory.

Revision ID: 0011_answer_changes
Revises: 0010 (see `down_revision`)

- `answer_changes`: one row per write that can change an agent's config or a claim's answer,
  appended by triggers, never updated. `scope` is `agent` (its id in `subject`), `org` or `all`;
  `xid` is the writing transaction's id. Each worker reads the rows of every transaction that
  was not yet visible at its previous read (`xid >=` that read's snapshot `xmin`), so a
  transaction that commits late is never skipped, whatever order the ids were handed out in
  (`control_plane.answers_cache.feed`).
- Agent scope: `credentials` (an agent's credential issued, revoked, rotated), `agents` (any
  column but `last_seen_at`, which the poll itself writes), `runs` and `tokens` (a claim, an
  outcome, a manual update, a revoked token).
- Everything: `platform_settings`, `platform_brake`, `releases`, `current_releases`.
- Revision 0010's tables, when they exist (this revision follows 0010 once merged): `holds`,
  `canary_agents` and `pins` (agent, and organisation for an organisation's pin) per row;
  `release_halts` and `rollout_settings` for everything.
- A table added later whose rows change an answer gets a trigger of its own:
  `EXECUTE FUNCTION note_answer_change('agent', 'agent_id')` (the scope and the column naming
  the subject) per row, or `note_answer_change_for_all()` per statement.
- The round counters have no trigger: inside a round they only grow, so "this round is full" is
  a fact a worker may keep until the round ends (or the caps change: `platform_settings`).
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0010_rollout_pins_halts"

revision = "0011_answer_changes"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
CREATE TABLE answer_changes (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid        xid8        NOT NULL DEFAULT pg_current_xact_id(),
    scope      text        NOT NULL CHECK (scope IN ('agent', 'org', 'all')),
    subject    uuid,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    CHECK ((scope = 'all') = (subject IS NULL))
);
CREATE INDEX answer_changes_xid ON answer_changes (xid);

-- Per row: TG_ARGV[0] is the scope, TG_ARGV[1] the column naming its subject. A row whose
-- subject is NULL (a panel or operator credential has no agent) changes no agent's answer.
CREATE FUNCTION note_answer_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    before uuid;
    after  uuid;
BEGIN
    IF TG_OP <> 'INSERT' THEN
        before := (to_jsonb(OLD) ->> TG_ARGV[1])::uuid;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        after := (to_jsonb(NEW) ->> TG_ARGV[1])::uuid;
    END IF;
    IF before IS NOT NULL THEN
        INSERT INTO answer_changes (scope, subject) VALUES (TG_ARGV[0], before);
    END IF;
    IF after IS NOT NULL AND after IS DISTINCT FROM before THEN
        INSERT INTO answer_changes (scope, subject) VALUES (TG_ARGV[0], after);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION note_answer_change_for_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO answer_changes (scope, subject) VALUES ('all', NULL);
    RETURN NULL;
END
$$;

CREATE TRIGGER credentials_answer_change AFTER INSERT OR UPDATE OR DELETE ON credentials
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('agent', 'agent_id');
-- The poll stamps `last_seen_at` (at most every 30 s per agent) and, after a gap, the stretch of
-- sightings (`online_since`, `previous_seen_at`): none of them changes an answer.
CREATE TRIGGER agents_answer_change AFTER UPDATE ON agents
    FOR EACH ROW WHEN (
        (to_jsonb(OLD) - 'last_seen_at' - 'online_since' - 'previous_seen_at') IS DISTINCT FROM
        (to_jsonb(NEW) - 'last_seen_at' - 'online_since' - 'previous_seen_at'))
    EXECUTE FUNCTION note_answer_change('agent', 'id');
CREATE TRIGGER agents_answer_gone AFTER DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('agent', 'id');
CREATE TRIGGER runs_answer_change AFTER INSERT OR UPDATE OR DELETE ON runs
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('agent', 'agent_id');
CREATE TRIGGER tokens_answer_change AFTER INSERT OR UPDATE OR DELETE ON tokens
    FOR EACH ROW EXECUTE FUNCTION note_answer_change('agent', 'agent_id');

CREATE TRIGGER platform_settings_answer_change
    AFTER INSERT OR UPDATE OR DELETE ON platform_settings
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();
CREATE TRIGGER platform_brake_answer_change AFTER INSERT OR UPDATE OR DELETE ON platform_brake
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();
CREATE TRIGGER releases_answer_change AFTER INSERT OR UPDATE OR DELETE ON releases
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();
CREATE TRIGGER current_releases_answer_change
    AFTER INSERT OR UPDATE OR DELETE ON current_releases
    FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all();

-- The rollout's tables (revision 0010), when this revision follows it: holds, pins and canaries
-- change one agent's (or one organisation's) offer; halts and the rollout settings everyone's.
DO $$
DECLARE
    followed record;
BEGIN
    FOR followed IN
        SELECT * FROM (VALUES
            ('holds', 'agent', 'agent_id', 'agent'),
            ('canary_agents', 'agent', 'agent_id', 'agent'),
            ('pins', 'agent', 'agent_id', 'agent'),
            ('pins', 'org', 'org_id', 'org'),
            ('release_halts', 'all', NULL, 'all'),
            ('rollout_settings', 'all', NULL, 'all')
        ) AS t(tbl, scope, subject, suffix)
    LOOP
        CONTINUE WHEN to_regclass(followed.tbl) IS NULL;
        IF followed.scope = 'all' THEN
            EXECUTE format(
                'CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I'
                ' FOR EACH STATEMENT EXECUTE FUNCTION note_answer_change_for_all()',
                followed.tbl || '_answer_change_' || followed.suffix, followed.tbl);
        ELSE
            EXECUTE format(
                'CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %I'
                ' FOR EACH ROW EXECUTE FUNCTION note_answer_change(%L, %L)',
                followed.tbl || '_answer_change_' || followed.suffix, followed.tbl,
                followed.scope, followed.subject);
        END IF;
    END LOOP;
END
$$;
"""

DOWNGRADE = """
DO $$
DECLARE
    found record;
BEGIN
    FOR found IN
        SELECT tgname, tgrelid::regclass AS tbl FROM pg_trigger
         WHERE tgname IN ('holds_answer_change_agent', 'canary_agents_answer_change_agent',
                          'pins_answer_change_agent', 'pins_answer_change_org',
                          'release_halts_answer_change_all', 'rollout_settings_answer_change_all')
    LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', found.tgname, found.tbl);
    END LOOP;
END
$$;
DROP TRIGGER current_releases_answer_change ON current_releases;
DROP TRIGGER releases_answer_change ON releases;
DROP TRIGGER platform_brake_answer_change ON platform_brake;
DROP TRIGGER platform_settings_answer_change ON platform_settings;
DROP TRIGGER tokens_answer_change ON tokens;
DROP TRIGGER runs_answer_change ON runs;
DROP TRIGGER agents_answer_gone ON agents;
DROP TRIGGER agents_answer_change ON agents;
DROP TRIGGER credentials_answer_change ON credentials;
DROP FUNCTION note_answer_change_for_all();
DROP FUNCTION note_answer_change();
DROP TABLE answer_changes;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
