"""Releases for a real fleet: stages, halts with their evidence, pins, holds, the brake per release.

Revision ID: 0010_rollout_pins_halts
Revises: 0009_faults_record

- `releases.stage`: `canary` → `everyone`. Releases already published are `everyone` (they are
  out there); the column default then becomes `canary`, so a release inserted without naming its
  stage starts in the canary stage — the column default does the work, as for the schedule.
- `releases.braked_*`: the brake's scope of one release (the platform's brake stays in
  `platform_brake`); an engaged release brake has a reason.
- `rollout_settings`: canary share, soak time and the halt threshold (a count and a rate within a
  window). The defaults and their reasons are in docs/control_plane.md.
- `canary_agents`: agents an operator marked as canaries for every release of their pair.
- `release_halts`: a halt (automatic on errors, or an operator's) until a person resumes it; at
  most one open halt per release. `release_halt_runs` is the evidence: the runs that tripped it.
- `operator_notices`: the operators' inbox; one notice per halt (the database refuses a second).
- `pins`: an organisation or one agent pinned to a version, or (version NULL) held at whatever
  the agent runs. `holds`: one agent held until a date, by its host, its customer or an operator.
- `forced_updates`: a manual update an operator forced through a brake or a halt.
- `agent_tracks`: the (channel, platform) an agent last claimed for, for the panel's API.
- Runs skipped because the agent was held are `missed` with the reason `held`; events may be
  written by the control plane itself (an automatic halt or promotion).
"""

from __future__ import annotations

from alembic import op

PREVIOUS_REVISION = "0009_faults_record"

revision = "0010_rollout_pins_halts"
down_revision: str | None = PREVIOUS_REVISION
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE releases
    ADD COLUMN stage            text        NOT NULL DEFAULT 'everyone'
        CONSTRAINT releases_stage_known CHECK (stage IN ('canary', 'everyone')),
    ADD COLUMN stage_changed_at timestamptz,
    ADD COLUMN braked_at        timestamptz,
    ADD COLUMN brake_reason     text,
    ADD COLUMN braked_by        text,
    ADD CONSTRAINT releases_brake_has_reason
        CHECK (braked_at IS NULL OR coalesce(length(btrim(brake_reason)), 0) > 0);
ALTER TABLE releases ALTER COLUMN stage SET DEFAULT 'canary';

CREATE TABLE rollout_settings (
    singleton            boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    canary_share_percent integer     NOT NULL DEFAULT 5
                                     CHECK (canary_share_percent BETWEEN 0 AND 100),
    soak_minutes         integer     NOT NULL DEFAULT 720 CHECK (soak_minutes BETWEEN 0 AND 20160),
    halt_failures        integer     NOT NULL DEFAULT 3 CHECK (halt_failures BETWEEN 1 AND 100000),
    halt_rate_percent    integer     NOT NULL DEFAULT 20
                                     CHECK (halt_rate_percent BETWEEN 1 AND 100),
    halt_window_minutes  integer     NOT NULL DEFAULT 360
                                     CHECK (halt_window_minutes BETWEEN 1 AND 20160),
    changed_at           timestamptz
);
INSERT INTO rollout_settings DEFAULT VALUES;

CREATE TABLE canary_agents (
    agent_id  uuid        PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    marked_at timestamptz NOT NULL,
    marked_by text        NOT NULL
);

CREATE TABLE release_halts (
    id            uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    release_id    uuid        NOT NULL REFERENCES releases (id) ON DELETE CASCADE,
    halted_at     timestamptz NOT NULL,
    cause         text        NOT NULL CHECK (cause IN ('errors', 'operator')),
    reason        text        NOT NULL CHECK (length(btrim(reason)) > 0),
    halted_by     text        NOT NULL,
    failures      integer,
    finished      integer,
    resumed_at    timestamptz,
    resumed_by    text,
    resume_reason text,
    CONSTRAINT release_halts_resume_has_reason
        CHECK (resumed_at IS NULL OR coalesce(length(btrim(resume_reason)), 0) > 0)
);
CREATE UNIQUE INDEX release_halts_one_open ON release_halts (release_id) WHERE resumed_at IS NULL;

CREATE TABLE release_halt_runs (
    halt_id uuid NOT NULL REFERENCES release_halts (id) ON DELETE CASCADE,
    run_id  uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    status  text NOT NULL CHECK (status IN ('failed', 'rolled_back')),
    PRIMARY KEY (halt_id, run_id)
);

CREATE TABLE operator_notices (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    kind       text        NOT NULL CHECK (kind IN ('release.halted')),
    halt_id    uuid        UNIQUE REFERENCES release_halts (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    body       jsonb       NOT NULL CHECK (jsonb_typeof(body) = 'object'),
    read_at    timestamptz
);
CREATE INDEX operator_notices_latest ON operator_notices (created_at DESC, id);

CREATE TABLE pins (
    id       uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id   uuid        REFERENCES orgs (id) ON DELETE CASCADE,
    agent_id uuid        REFERENCES agents (id) ON DELETE CASCADE,
    -- NULL: hold at whatever the agent runs.
    version  text        CHECK (version IS NULL OR length(btrim(version)) > 0),
    reason   text,
    set_at   timestamptz NOT NULL,
    set_by   text        NOT NULL,
    CONSTRAINT pins_one_scope CHECK ((org_id IS NULL) <> (agent_id IS NULL))
);
CREATE UNIQUE INDEX pins_one_per_org ON pins (org_id) WHERE org_id IS NOT NULL;
CREATE UNIQUE INDEX pins_one_per_agent ON pins (agent_id) WHERE agent_id IS NOT NULL;

CREATE TABLE holds (
    agent_id  uuid        PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    until     timestamptz NOT NULL,
    reason    text,
    set_by    text        NOT NULL CHECK (set_by IN ('agent', 'customer', 'operator')),
    set_by_id uuid,
    set_at    timestamptz NOT NULL,
    CONSTRAINT holds_until_after_set CHECK (until > set_at)
);

CREATE TABLE forced_updates (
    run_id    uuid        PRIMARY KEY REFERENCES runs (id) ON DELETE CASCADE,
    reason    text        NOT NULL CHECK (length(btrim(reason)) > 0),
    forced_at timestamptz NOT NULL,
    forced_by text        NOT NULL
);

CREATE TABLE agent_tracks (
    agent_id uuid        PRIMARY KEY REFERENCES agents (id) ON DELETE CASCADE,
    channel  text        NOT NULL CHECK (channel ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    platform text        NOT NULL CHECK (platform ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    seen_at  timestamptz NOT NULL
);

-- Failures of a release within the halt window, and its canaries' first success.
CREATE INDEX runs_release_finished ON runs (release_id, finished_at)
    WHERE release_id IS NOT NULL AND finished_at IS NOT NULL;

ALTER TABLE runs DROP CONSTRAINT runs_miss_reason_known;
ALTER TABLE runs ADD CONSTRAINT runs_miss_reason_known
    CHECK (miss_reason IN (
        'offline', 'throttled', 'brake', 'unknown', 'platform_unavailable', 'held'));

ALTER TABLE events DROP CONSTRAINT events_actor_kind_check;
ALTER TABLE events ADD CONSTRAINT events_actor_kind_check
    CHECK (actor_kind IN ('schedule', 'user', 'agent', 'operator', 'control_plane'));
"""

DOWNGRADE = r"""
DELETE FROM events WHERE actor_kind = 'control_plane';
ALTER TABLE events DROP CONSTRAINT events_actor_kind_check;
ALTER TABLE events ADD CONSTRAINT events_actor_kind_check
    CHECK (actor_kind IN ('schedule', 'user', 'agent', 'operator'));
DELETE FROM runs WHERE miss_reason = 'held';
ALTER TABLE runs DROP CONSTRAINT runs_miss_reason_known;
ALTER TABLE runs ADD CONSTRAINT runs_miss_reason_known
    CHECK (miss_reason IN ('offline', 'throttled', 'brake', 'unknown', 'platform_unavailable'));
DROP INDEX runs_release_finished;
DROP TABLE agent_tracks;
DROP TABLE forced_updates;
DROP TABLE holds;
DROP TABLE pins;
DROP TABLE operator_notices;
DROP TABLE release_halt_runs;
DROP TABLE release_halts;
DROP TABLE canary_agents;
DROP TABLE rollout_settings;
ALTER TABLE releases
    DROP CONSTRAINT releases_brake_has_reason,
    DROP COLUMN braked_by,
    DROP COLUMN brake_reason,
    DROP COLUMN braked_at,
    DROP COLUMN stage_changed_at,
    DROP COLUMN stage;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
