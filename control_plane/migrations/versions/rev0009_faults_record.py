"""The record says what happened under faults (the control plane's side).

Revision ID: 0009_faults_record
Revises: 0008_release_tracks_withdraw

- Run status `unauthorised`: an agent reported a switch (`succeeded` / `rolled_back`) the control
  plane had not authorised — its token was revoked or expired, or the slot's window had closed,
  before the switch. Stored as what it is, never as a success.
- `outcome_reason`: why a run ended so (the values of `ground.contract.OutcomeReason` when this
  revision was made, written out: a migration is frozen); `switched_at`: when the agent says it
  switched.
- `outcome_inferred`: the reconcile ended a claim nobody reported (its window and its token's
  lifetime long over); a report that arrives later replaces that inference.
- Run status `skipped` with `skip_reason` (the contract's "nothing to do" refusals that consume
  the slot without a token: `release_rolled_back`, `held`), so the agent page says why.
- Miss reason `platform_unavailable`: the control plane itself was down during the window.
- Agents: `online_since` and `previous_seen_at` keep the current and the previous stretch of polls,
  so the worker judges reachability within a window rather than at pass time;
  `release_retry_at` is an operator's "try the release this host rolled back again".
- `platform_liveness`: each serving process marks that it is up; a window no mark covers was an
  outage of ours.
"""

from __future__ import annotations

from alembic import op

revision = "0009_faults_record"
down_revision: str | None = "0008_release_tracks_withdraw"
branch_labels = None
depends_on = None


def _sql_list(values: list[str]) -> str:
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


OUTCOME_REASONS = _sql_list(
    [
        "platform_unavailable",
        "interrupted",
        "token_revoked",
        "token_expired",
        "disk_full",
        "download_failed",
        "verification_failed",
        "install_failed",
        "health_check_failed",
    ]
)
# The contract's refusals that consume the slot without a token.
SKIP_REASONS = _sql_list(["held", "release_rolled_back"])

# Built from this revision's constants only, never from input.
UPGRADE = f"""
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs
    ADD CONSTRAINT runs_status_check CHECK (status IN (
        'requested', 'claimed', 'up_to_date', 'succeeded', 'failed', 'rolled_back', 'missed',
        'unauthorised', 'skipped')),
    ADD COLUMN outcome_reason text
        CONSTRAINT runs_outcome_reason_known CHECK (outcome_reason IN ({OUTCOME_REASONS})),
    ADD COLUMN switched_at timestamptz,
    ADD COLUMN outcome_inferred boolean NOT NULL DEFAULT false,
    ADD COLUMN skip_reason text
        CONSTRAINT runs_skip_reason_known CHECK (skip_reason IN ({SKIP_REASONS})),
    -- A skipped run always says why, and only a skipped run has a skip reason.
    ADD CONSTRAINT runs_skipped_has_reason CHECK ((status = 'skipped') = (skip_reason IS NOT NULL)),
    ADD CONSTRAINT runs_skipped_is_scheduled CHECK (status <> 'skipped' OR trigger = 'schedule'),
    DROP CONSTRAINT runs_miss_reason_known,
    ADD CONSTRAINT runs_miss_reason_known CHECK (miss_reason IN (
        'offline', 'throttled', 'brake', 'unknown', 'platform_unavailable'));
-- The reconcile's search for claims that outlived their window.
CREATE INDEX runs_claimed_scheduled ON runs (slot_at)
    WHERE status = 'claimed' AND trigger = 'schedule';

ALTER TABLE agents
    ADD COLUMN online_since     timestamptz,
    ADD COLUMN previous_seen_at timestamptz,
    ADD COLUMN release_retry_at timestamptz;
UPDATE agents SET online_since = last_seen_at;

-- `allowed_gap`: how far apart this replica's marks may be and still be one stretch (longer on a
-- fast fake clock, where a slow pass is many product minutes).
CREATE TABLE platform_liveness (
    replica      text        NOT NULL,
    started_at   timestamptz NOT NULL,
    last_mark_at timestamptz NOT NULL,
    allowed_gap  interval    NOT NULL CHECK (allowed_gap > interval '0'),
    PRIMARY KEY (replica, started_at),
    CHECK (last_mark_at >= started_at)
);
CREATE INDEX platform_liveness_last_mark ON platform_liveness (last_mark_at);
"""  # noqa: S608

DOWNGRADE = """
DROP TABLE platform_liveness;
ALTER TABLE agents
    DROP COLUMN release_retry_at,
    DROP COLUMN previous_seen_at,
    DROP COLUMN online_since;
DROP INDEX runs_claimed_scheduled;
DELETE FROM runs WHERE status IN ('unauthorised', 'skipped');
UPDATE runs SET miss_reason = 'unknown' WHERE miss_reason = 'platform_unavailable';
ALTER TABLE runs
    DROP CONSTRAINT runs_miss_reason_known,
    ADD CONSTRAINT runs_miss_reason_known
        CHECK (miss_reason IN ('offline', 'throttled', 'brake', 'unknown')),
    DROP CONSTRAINT runs_skipped_is_scheduled,
    DROP CONSTRAINT runs_skipped_has_reason,
    DROP COLUMN skip_reason,
    DROP COLUMN outcome_inferred,
    DROP COLUMN switched_at,
    DROP COLUMN outcome_reason,
    DROP CONSTRAINT runs_status_check,
    ADD CONSTRAINT runs_status_check CHECK (status IN (
        'requested', 'claimed', 'up_to_date', 'succeeded', 'failed', 'rolled_back', 'missed'));
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
