"""Missed slots and their reason, claim refusals, notifications, webhooks, the worker's progress.

Revision ID: 0005_reconcile_notifications
Revises: 0004_releases_runs_events

A slot whose window closed without a run row gets one with status `missed` and a reason, so the
agent page shows silence as a fact. The reason comes from `claim_refusals`: what the claim endpoint
answered that agent for that slot (written in batches, never on the refusal's hot path).

Notifications are decided once per organisation per slot (`slot_reviews`, even when the decision is
silence) and at most one exists per organisation per slot. `agent_mentions` carries the "named at
most once per agent per calendar day" rules for failures and for agents silent for three days.
Manual runs can never be considered for a notification: the database refuses it.
"""

from __future__ import annotations

from alembic import op

revision = "0005_reconcile_notifications"
down_revision: str | None = "0004_releases_runs_events"
branch_labels = None
depends_on = None

UPGRADE = r"""
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs
    ADD CONSTRAINT runs_status_check CHECK (status IN (
        'requested', 'claimed', 'up_to_date', 'succeeded', 'failed', 'rolled_back', 'missed')),
    ADD COLUMN miss_reason text
        CONSTRAINT runs_miss_reason_known
        CHECK (miss_reason IN ('offline', 'throttled', 'brake', 'unknown')),
    ADD COLUMN notify_considered_at timestamptz,
    -- A missed run always says why, and only a missed run has a miss reason.
    ADD CONSTRAINT runs_missed_has_reason CHECK ((status = 'missed') = (miss_reason IS NOT NULL)),
    -- Only a slot can be missed: a manual update has no window.
    ADD CONSTRAINT runs_missed_is_scheduled CHECK (status <> 'missed' OR trigger = 'schedule'),
    -- Manual runs never notify (a person was watching), and a run is considered once finished.
    ADD CONSTRAINT runs_considered_is_scheduled_and_finished CHECK (
        notify_considered_at IS NULL
        OR (trigger = 'schedule' AND status NOT IN ('requested', 'claimed')));
CREATE INDEX runs_not_yet_considered ON runs (slot_at)
    WHERE trigger = 'schedule' AND notify_considered_at IS NULL;

CREATE TABLE claim_refusals (
    agent_id uuid        NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    slot_key text        NOT NULL CHECK (slot_key ~ '^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}$'),
    reason   text        NOT NULL CHECK (reason IN ('org_cap', 'global_cap', 'brake')),
    first_at timestamptz NOT NULL,
    PRIMARY KEY (agent_id, slot_key, reason)
);

CREATE TABLE notifications (
    id         uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    org_id     uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    slot_key   text        NOT NULL,
    slot_at    timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    body       jsonb       NOT NULL CHECK (jsonb_typeof(body) = 'object'),
    read_at    timestamptz,
    UNIQUE (org_id, slot_key)
);
CREATE INDEX notifications_org_latest ON notifications (org_id, created_at DESC, id);

-- The decision for one organisation's slot, also when it was to stay silent.
CREATE TABLE slot_reviews (
    org_id          uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    slot_key        text        NOT NULL,
    slot_at         timestamptz NOT NULL,
    decided_at      timestamptz NOT NULL,
    notification_id uuid        REFERENCES notifications (id) ON DELETE SET NULL,
    PRIMARY KEY (org_id, slot_key)
);

CREATE TABLE agent_mentions (
    agent_id        uuid NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    local_day       date NOT NULL,
    kind            text NOT NULL CHECK (kind IN ('failure', 'stale')),
    notification_id uuid NOT NULL REFERENCES notifications (id) ON DELETE CASCADE,
    PRIMARY KEY (agent_id, local_day, kind)
);

-- The secret is kept as given: signing needs the key itself, so a hash would not do.
CREATE TABLE webhooks (
    org_id     uuid        PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
    url        text        NOT NULL CHECK (url ~ '^https?://[^/\s]+' AND length(url) <= 2000),
    secret     text        NOT NULL CHECK (length(secret) BETWEEN 16 AND 200),
    updated_at timestamptz NOT NULL
);

CREATE TABLE webhook_deliveries (
    notification_id uuid        PRIMARY KEY REFERENCES notifications (id) ON DELETE CASCADE,
    org_id          uuid        NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
    state           text        NOT NULL DEFAULT 'pending'
                                CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz,
    last_error      text,
    delivered_at    timestamptz,
    CONSTRAINT webhook_deliveries_pending_has_next
        CHECK ((state = 'pending') = (next_attempt_at IS NOT NULL)),
    CONSTRAINT webhook_deliveries_delivered_has_time
        CHECK ((state = 'delivered') = (delivered_at IS NOT NULL))
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at)
    WHERE state = 'pending';

CREATE TABLE webhook_attempts (
    notification_id uuid        NOT NULL
                                REFERENCES webhook_deliveries (notification_id) ON DELETE CASCADE,
    attempt         integer     NOT NULL CHECK (attempt >= 1),
    at              timestamptz NOT NULL,
    url             text        NOT NULL,
    status_code     integer,
    error           text,
    outcome         text        NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed')),
    PRIMARY KEY (notification_id, attempt)
);

-- How far the worker has reconciled (windows closed up to this instant), so it catches up.
CREATE TABLE reconcile_progress (
    singleton        boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    reconciled_until timestamptz,
    last_pass_at     timestamptz,
    last_pass_by     text,
    passes           bigint      NOT NULL DEFAULT 0 CHECK (passes >= 0)
);
INSERT INTO reconcile_progress DEFAULT VALUES;
"""

DOWNGRADE = """
DROP TABLE reconcile_progress;
DROP TABLE webhook_attempts;
DROP TABLE webhook_deliveries;
DROP TABLE webhooks;
DROP TABLE agent_mentions;
DROP TABLE slot_reviews;
DROP TABLE notifications;
DROP TABLE claim_refusals;
DROP INDEX runs_not_yet_considered;
DELETE FROM runs WHERE status = 'missed';
ALTER TABLE runs
    DROP CONSTRAINT runs_considered_is_scheduled_and_finished,
    DROP CONSTRAINT runs_missed_is_scheduled,
    DROP CONSTRAINT runs_missed_has_reason,
    DROP COLUMN notify_considered_at,
    DROP COLUMN miss_reason,
    DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN (
    'requested', 'claimed', 'up_to_date', 'succeeded', 'failed', 'rolled_back'));
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
