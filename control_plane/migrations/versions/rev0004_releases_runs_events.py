"""Releases, update runs, throttle tokens, the caps' round counters, events and the brake.

Revision ID: 0004_releases_runs_events
Revises: 0003_platform_settings

A scheduled run row is the claim of its slot: one per agent and slot key, enforced here, so a slot
is consumed exactly once however many requests race for it. The caps are counted per round (one
minute of the control plane's clock) in one row per organisation and one global row; a grant
increments both under their row locks with `granted < cap` in the UPDATE, which makes the caps
exact across any number of replicas. A refusal only reads those rows.
"""

from __future__ import annotations

from alembic import op

revision = "0004_releases_runs_events"
down_revision: str | None = "0003_platform_settings"
branch_labels = None
depends_on = None

UPGRADE = """
CREATE TABLE releases (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    manifest_version bigint      NOT NULL UNIQUE CHECK (manifest_version > 0),
    agent_version    text        NOT NULL,
    channel          text        NOT NULL,
    platform         text        NOT NULL,
    issued_at        timestamptz NOT NULL,
    expires          timestamptz NOT NULL,
    length           bigint      NOT NULL CHECK (length >= 0),
    sha256           text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    key_id           text        NOT NULL,
    manifest         bytea       NOT NULL,
    signature        bytea       NOT NULL,
    published_at     timestamptz NOT NULL
);

-- The build itself, apart from the small release row. EXTERNAL storage (no compression: a tar.gz
-- does not compress) lets PostgreSQL read a byte range without reading the whole value.
CREATE TABLE release_artifacts (
    release_id uuid  PRIMARY KEY REFERENCES releases (id) ON DELETE CASCADE,
    content    bytea NOT NULL
);
ALTER TABLE release_artifacts ALTER COLUMN content SET STORAGE EXTERNAL;

CREATE TABLE runs (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    agent_id     uuid        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    org_id       uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    trigger      text        NOT NULL CHECK (trigger IN ('schedule', 'manual')),
    slot_key     text,
    slot_at      timestamptz,
    status       text        NOT NULL CHECK (status IN (
                     'requested', 'claimed', 'up_to_date', 'succeeded', 'failed', 'rolled_back')),
    release_id   uuid        REFERENCES releases (id),
    from_version text,
    version      text,
    error        text,
    requested_by uuid        REFERENCES credentials (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL,
    claimed_at   timestamptz,
    finished_at  timestamptz,
    CONSTRAINT runs_schedule_names_its_slot CHECK (
        (trigger = 'schedule' AND slot_key IS NOT NULL AND slot_at IS NOT NULL
         AND status <> 'requested')
        OR (trigger = 'manual' AND slot_key IS NULL AND slot_at IS NULL)
    )
);
CREATE UNIQUE INDEX runs_one_per_slot ON runs (agent_id, slot_key) WHERE trigger = 'schedule';
CREATE INDEX runs_agent_latest_slot ON runs (agent_id, slot_at DESC) WHERE trigger = 'schedule';
CREATE INDEX runs_agent_created ON runs (agent_id, created_at DESC);
CREATE UNIQUE INDEX runs_one_pending_manual ON runs (agent_id)
    WHERE trigger = 'manual' AND status = 'requested';

-- The throttle token: a lease on one run's download, revocable.
CREATE TABLE tokens (
    id             uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    run_id         uuid        NOT NULL UNIQUE REFERENCES runs (id) ON DELETE CASCADE,
    agent_id       uuid        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    release_id     uuid        NOT NULL REFERENCES releases (id),
    round_start    timestamptz,
    granted_at     timestamptz NOT NULL,
    expires_at     timestamptz NOT NULL,
    revoked_at     timestamptz,
    revoked_reason text
);
CREATE INDEX tokens_outstanding ON tokens (expires_at) WHERE revoked_at IS NULL;

CREATE TABLE claim_rounds_org (
    round_start timestamptz NOT NULL,
    org_id      uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    granted     integer     NOT NULL DEFAULT 0 CHECK (granted >= 0),
    PRIMARY KEY (round_start, org_id)
);

CREATE TABLE claim_rounds_global (
    round_start timestamptz PRIMARY KEY,
    granted     integer     NOT NULL DEFAULT 0 CHECK (granted >= 0)
);

CREATE TABLE events (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id     uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    agent_id   uuid        REFERENCES agents (id) ON DELETE CASCADE,
    run_id     uuid        REFERENCES runs (id) ON DELETE CASCADE,
    kind       text        NOT NULL,
    actor_kind text        NOT NULL CHECK (actor_kind IN ('schedule', 'user', 'agent', 'operator')),
    actor_id   uuid,
    at         timestamptz NOT NULL,
    data       jsonb       NOT NULL DEFAULT '{}'
);
CREATE INDEX events_agent_at ON events (agent_id, at DESC, id DESC);

CREATE TABLE platform_brake (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    engaged    boolean     NOT NULL DEFAULT false,
    reason     text,
    changed_at timestamptz,
    changed_by uuid        REFERENCES credentials (id) ON DELETE SET NULL
);
INSERT INTO platform_brake DEFAULT VALUES;
"""

DOWNGRADE = """
DROP TABLE platform_brake;
DROP TABLE events;
DROP TABLE claim_rounds_global;
DROP TABLE claim_rounds_org;
DROP TABLE tokens;
DROP TABLE runs;
DROP TABLE release_artifacts;
DROP TABLE releases;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
