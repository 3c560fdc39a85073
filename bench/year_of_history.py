"""A year in production, written into a migrated database in minutes: the fleet, then its history.

Two steps, each usable alone:

`seed_fleet`   organisations, agents (each following one channel/platform pair), their
               credentials with keys derived from their index (so two databases seeded alike
               answer to the same keys), one panel key per organisation, an operator key, webhooks
               for a fifth of the organisations, and the year's releases of every pair (signed,
               published through the releases service at their own dates, promoted to everyone).
`fill_history` for every agent, every day, every slot: a scheduled run of each kind the product
               writes (up_to_date on most nights; succeeded, failed, rolled_back, unauthorised the
               first night after a release; missed with every miss reason; skipped with every
               skip reason), manual runs now and then, the events each of those writes, tokens
               and claim rounds for the grants, claim refusals behind the throttled and braked
               misses, one review per organisation and slot with its notification (and webhook
               deliveries and attempts), the failures' mentions, and the operators' trail.

Written set-based (INSERT … SELECT over generate_series, a month per statement) with the
session's triggers off (`session_replication_role = replica`): the change feed the answer memory
follows would otherwise hold a row per historical run, and per-row counting triggers would take
most of the time. What those triggers keep is then computed once, with their own rules:
`run_ending_counts` (and the figures `/metrics` reads). Every CHECK constraint holds (they are not
triggers); foreign keys hold by construction, which `tests/control_plane/test_query_plans.py`
checks. The draw is deterministic (a hash of agent, day and purpose), so a scale gives the same
history every time.

    PYTHONPATH=. .venv/bin/python bench/year_of_history.py --database-url URL
        [--agents 10000] [--orgs 250] [--days 365] [--slots 1] [--until 2026-11-29]
    PYTHONPATH=. .venv/bin/python bench/year_of_history.py --scale 0.01 …   (100 agents, 3 orgs…)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.types.json import Jsonb

from control_plane.database import open_pool
from control_plane.registry import build_services
from tests.worlds.releases import ReleaseFactory

__all__ = [
    "PAIRS",
    "History",
    "agent_key",
    "fill_history",
    "operator_key",
    "panel_key",
    "seed_fleet",
]

PAIRS = (("stable", "linux-x86_64"), ("stable", "linux-arm64"), ("beta", "linux-x86_64"))
SLOT_TIMES = ("03:00", "15:00")
ZONE = "Europe/Amsterdam"
WINDOW_MINUTES = 15  # the platform's default catch-up window
RELEASE_EVERY_DAYS = 14
WEBHOOK_EVERY_NTH_ORG = 5


def agent_key(n: int) -> str:
    """The key of agent number `n` (0-based): derived, so every database seeded alike accepts it."""
    return "nwa_" + hashlib.sha256(f"history-agent-{n}".encode()).hexdigest()


def panel_key(n: int) -> str:
    return "nwp_" + hashlib.sha256(f"history-panel-{n}".encode()).hexdigest()


def operator_key() -> str:
    return "nwo_" + hashlib.sha256(b"history-operator").hexdigest()


@dataclass(frozen=True, kw_only=True)
class History:
    """What to write: `agents` in `orgs` organisations, `days` days ending with `until` (a local
    date), `slots` scheduled slots a day (03:00, and 15:00 with two)."""

    agents: int = 10_000
    orgs: int = 250
    days: int = 365
    slots: int = 1
    until: date = date(2026, 11, 29)

    @property
    def first_day(self) -> date:
        return self.until - timedelta(days=self.days - 1)

    @property
    def enrolled_at(self) -> datetime:
        return datetime.combine(self.first_day - timedelta(days=1), datetime.min.time(), UTC)

    @staticmethod
    def scaled(scale: float, *, days: int | None = None) -> History:
        """A smaller world of the same shape: `scale` 0.01 is 100 agents in 3 organisations."""
        return History(
            agents=max(2, round(10_000 * scale)),
            orgs=max(1, round(250 * scale)),
            days=days if days is not None else max(14, round(365 * min(1.0, scale * 10))),
        )


# -- the fleet -------------------------------------------------------------------------------------

_FLEET = """
INSERT INTO orgs (name, created_at)
SELECT format('org-%%s', lpad(g::text, 3, '0')), %(enrolled_at)s
  FROM generate_series(0, %(orgs)s - 1) g;

CREATE TEMP TABLE fleet_org ON COMMIT DROP AS
SELECT (row_number() OVER (ORDER BY name) - 1)::int AS n, id FROM orgs;

INSERT INTO agents (org_id, name, created_at, update_schedule_times, last_seen_at, online_since)
SELECT o.id, format('agent-%%s', lpad(g::text, 5, '0')), %(enrolled_at)s, %(times)s::jsonb,
       %(enrolled_at)s, %(enrolled_at)s
  FROM generate_series(0, %(agents)s - 1) g JOIN fleet_org o ON o.n = g %% %(orgs)s;

CREATE TEMP TABLE fleet_agent ON COMMIT DROP AS
SELECT (row_number() OVER (ORDER BY name) - 1)::int AS n, id, org_id FROM agents;

INSERT INTO agent_tracks (agent_id, channel, platform, seen_at)
SELECT a.id, p.channel, p.platform, %(enrolled_at)s
  FROM fleet_agent a
  JOIN unnest(%(channels)s::text[], %(platforms)s::text[]) WITH ORDINALITY
       AS p(channel, platform, k) ON p.k - 1 = (a.n / %(orgs)s) %% %(pairs)s;

INSERT INTO credentials (audience, secret_sha256, org_id, agent_id, name, label, created_at)
SELECT 'agent', encode(sha256(convert_to('nwa_' || encode(sha256(convert_to(
           'history-agent-' || a.n, 'UTF8')), 'hex'), 'UTF8')), 'hex'),
       a.org_id, a.id, 'agent-' || lpad(a.n::text, 5, '0'), 'agent-' || lpad(a.n::text, 5, '0'),
       %(enrolled_at)s
  FROM fleet_agent a;

INSERT INTO credentials (audience, secret_sha256, org_id, name, label, created_at)
SELECT 'panel', encode(sha256(convert_to('nwp_' || encode(sha256(convert_to(
           'history-panel-' || o.n, 'UTF8')), 'hex'), 'UTF8')), 'hex'),
       o.id, 'panel of org ' || o.n, 'panel of org ' || o.n, %(enrolled_at)s
  FROM fleet_org o;

INSERT INTO credentials (audience, secret_sha256, name, label, created_at)
VALUES ('operator', encode(sha256(convert_to(%(operator_key)s, 'UTF8')), 'hex'),
        'history operator', 'history operator', %(enrolled_at)s);

INSERT INTO webhooks (org_id, url, secret, updated_at)
SELECT o.id, 'http://127.0.0.1:9/hooks/' || o.n, 'history-webhook-secret-' || o.n, %(enrolled_at)s
  FROM fleet_org o WHERE o.n %% %(webhook_every)s = 0;
"""


def seed_fleet(database_url: str, history: History, workdir: Path) -> None:
    """The organisations, agents, credentials, webhooks and releases (the same for an empty
    history and a year of it)."""
    with psycopg.connect(database_url, cursor_factory=psycopg.ClientCursor) as conn:
        conn.execute(
            _FLEET,
            {
                "orgs": history.orgs,
                "agents": history.agents,
                "enrolled_at": history.enrolled_at,
                "times": Jsonb(list(SLOT_TIMES[: history.slots])),
                "channels": [c for c, _ in PAIRS],
                "platforms": [p for _, p in PAIRS],
                "pairs": len(PAIRS),
                "operator_key": operator_key(),
                "webhook_every": WEBHOOK_EVERY_NTH_ORG,
            },
            prepare=False,
        )
        conn.commit()
    _publish_releases(database_url, history, workdir)


def _publish_releases(database_url: str, history: History, workdir: Path) -> None:
    """Every pair's releases of the year, one every `RELEASE_EVERY_DAYS` from the first day, each
    published at noon of its day and promoted to everyone twelve hours later; an old one
    withdrawn and one halted on errors and resumed, as a year sees."""
    first = history.enrolled_at + timedelta(hours=11)
    factory = ReleaseFactory(workdir=workdir, issued_at=first - timedelta(hours=1))
    artifact = os.urandom(4096)
    pool = open_pool(database_url, min_size=1, max_size=2)
    try:
        services = build_services(pool, factory.trusted)
        count = (history.days - 1) // RELEASE_EVERY_DAYS + 1
        for k in range(count):
            at = first + timedelta(days=k * RELEASE_EVERY_DAYS)
            for channel, platform in PAIRS:
                release = factory.sign(
                    artifact,
                    version=f"1.{k}.0",
                    manifest_version=k + 1,
                    expires_in=timedelta(days=history.days + 400),
                    issued_at=at - timedelta(hours=1),
                    unpacked_size=len(artifact),
                    channel=channel,
                    platform=platform,
                )
                services.releases.publish(
                    release.manifest_bytes, release.signature, release.artifact, now=at
                )
    finally:
        pool.close()
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE releases SET stage = 'everyone', stage_changed_at = published_at + interval"
            " '12 hours'"
        )
        if count >= 4:
            conn.execute(
                "INSERT INTO release_halts (release_id, halted_at, cause, reason, halted_by,"
                " failures, finished, resumed_at, resumed_by, resume_reason)"
                " SELECT id, published_at + interval '1 day', 'errors',"
                " 'failure rate above the threshold', 'control_plane', 7, 30,"
                " published_at + interval '2 days', 'history operator', 'a bad mirror, fixed'"
                " FROM releases WHERE manifest_version = 2 AND channel = 'beta'"
            )
            conn.execute(
                "UPDATE releases SET withdrawn_at = published_at + interval '3 days',"
                " withdrawn_reason = 'crashes on old kernels', withdrawn_by = 'history operator'"
                " WHERE manifest_version = 3 AND channel = 'stable'"
                " AND platform = 'linux-arm64'"
            )


# -- the history -----------------------------------------------------------------------------------

# A uniform draw in [0, 1) per agent, slot and purpose: deterministic, and independent enough
# between purposes for a benchmark's mix.
_DRAW = "((hashint8(a.n::bigint * 1000003 + s.k * 7919 + {salt}) & 1048575) / 1048576.0)"


def _draw(salt: int) -> str:
    return _DRAW.format(salt=salt)


_SETUP = """
CREATE TEMP TABLE hist_agent AS
SELECT (row_number() OVER (ORDER BY a.name) - 1)::int AS n, a.id, a.org_id, t.channel, t.platform,
       a.update_schedule_times AS times
  FROM agents a JOIN agent_tracks t ON t.agent_id = a.id WHERE a.deleted_at IS NULL;

-- Every slot of the history: (day index, time index) -> key and instant.
CREATE TEMP TABLE hist_slot AS
SELECT (d * 2 + t.k1 - 1)::int AS k, d, (t.k1 - 1)::int AS time_k,
       to_char(%(first_day)s::date + d, 'YYYY-MM-DD') || 'T' || t.wall AS slot_key,
       ((%(first_day)s::date + d) + t.wall::time) AT TIME ZONE %(zone)s AS slot_at
  FROM generate_series(0, %(days)s - 1) d
 CROSS JOIN unnest(%(times)s::text[]) WITH ORDINALITY AS t(wall, k1);
"""

# The pair's release current at each slot, and whether it is new since the slot before (the
# night its agents update).
_RELEASE_AT = """
CREATE TEMP TABLE hist_offer AS
SELECT s.k, p.channel, p.platform, cur.id AS release_id, cur.agent_version AS version,
       coalesce(prev.agent_version, cur.agent_version) AS from_version,
       prev.id IS NOT NULL AND NOT EXISTS (
           SELECT 1 FROM hist_slot b WHERE b.slot_at < s.slot_at AND b.slot_at > cur.published_at
       ) AS new_release
  FROM hist_slot s
 CROSS JOIN (SELECT DISTINCT channel, platform FROM hist_agent) p
 CROSS JOIN LATERAL (
       SELECT id, agent_version, manifest_version, published_at FROM releases r
        WHERE r.channel = p.channel AND r.platform = p.platform AND r.published_at <= s.slot_at
          AND (r.withdrawn_at IS NULL OR r.withdrawn_at > s.slot_at)
        ORDER BY manifest_version DESC LIMIT 1) cur
  LEFT JOIN LATERAL (
       SELECT id, agent_version FROM releases r
        WHERE r.channel = p.channel AND r.platform = p.platform
          AND r.manifest_version < cur.manifest_version
        ORDER BY manifest_version DESC LIMIT 1) prev ON true;
CREATE INDEX ON hist_offer (k, channel, platform);
ANALYZE hist_offer;
"""

_PLAN = f"""
CREATE TEMP TABLE hist_plan AS
WITH drawn AS (
    SELECT gen_random_uuid() AS id, a.id AS agent_id, a.org_id, a.n, s.k, s.slot_key, s.slot_at,
           o.release_id, o.version, o.from_version, o.new_release,
           {_draw(1)} AS u, {_draw(2)} AS v, {_draw(3)} AS w
      FROM hist_slot s
      JOIN hist_agent a ON jsonb_array_length(a.times) > s.time_k
      JOIN hist_offer o ON o.k = s.k AND o.channel = a.channel AND o.platform = a.platform
     WHERE s.d >= %(from_day)s AND s.d < %(to_day)s
)
SELECT *,
       CASE
           WHEN u < 0.055 THEN 'offline'
           WHEN u < 0.075 THEN 'throttled'
           WHEN u < 0.085 THEN 'unknown'
           WHEN u < 0.090 THEN 'held'
           WHEN u < 0.095 THEN 'platform_unavailable'
           WHEN u < 0.100 THEN 'brake'
       END AS miss_reason,
       CASE
           WHEN u < 0.100 THEN 'missed'
           WHEN u < 0.104 THEN 'skipped'
           WHEN new_release AND u < 0.120 THEN 'failed'
           WHEN new_release AND u < 0.130 THEN 'rolled_back'
           WHEN new_release AND u < 0.131 THEN 'unauthorised'
           WHEN new_release THEN 'succeeded'
           WHEN u < 0.102 + 0.004 THEN 'failed'
           ELSE 'up_to_date'
       END AS status,
       (ARRAY['held', 'release_rolled_back', 'release_halted'])[1 + floor(v * 3)::int]
           AS skip_reason,
       (ARRAY['platform_unavailable', 'interrupted', 'token_revoked', 'token_expired',
              'disk_full', 'download_failed', 'verification_failed', 'install_failed',
              'health_check_failed'])[1 + floor(v * 9)::int] AS failure_reason,
       slot_at + make_interval(secs => floor(w * 240)) AS claimed_at,
       slot_at + interval '{WINDOW_MINUTES} minutes' AS window_closes
  FROM drawn;
"""  # noqa: S608 - constant fragments; values are bound

_CLAIMED = "('succeeded', 'failed', 'rolled_back', 'unauthorised')"

_WRITE_RUNS = f"""
INSERT INTO runs (id, agent_id, org_id, trigger, slot_key, slot_at, status, release_id,
                  from_version, version, error, created_at, claimed_at, finished_at, miss_reason,
                  notify_considered_at, outcome_reason, switched_at, skip_reason)
SELECT id, agent_id, org_id, 'schedule', slot_key, slot_at, status,
       CASE WHEN status IN {_CLAIMED} OR status = 'skipped' THEN release_id END,
       CASE WHEN status = 'missed' THEN NULL
            WHEN status = 'up_to_date' THEN version ELSE from_version END,
       CASE status WHEN 'succeeded' THEN version WHEN 'up_to_date' THEN version
                   WHEN 'rolled_back' THEN from_version WHEN 'unauthorised' THEN version
                   WHEN 'skipped' THEN from_version END,
       CASE status WHEN 'failed' THEN 'update failed: ' || failure_reason
                   WHEN 'rolled_back' THEN 'health check failed after the switch' END,
       CASE WHEN status = 'missed' THEN window_closes + interval '1 minute' ELSE claimed_at END,
       CASE WHEN status IN {_CLAIMED} THEN claimed_at END,
       CASE WHEN status = 'missed' THEN window_closes
            WHEN status IN {_CLAIMED} THEN claimed_at + interval '3 minutes'
            ELSE claimed_at END,
       CASE WHEN status = 'missed' THEN miss_reason END,
       window_closes + interval '5 minutes',
       CASE status WHEN 'failed' THEN failure_reason
                   WHEN 'rolled_back' THEN 'health_check_failed' END,
       CASE WHEN status IN ('succeeded', 'rolled_back', 'unauthorised')
            THEN claimed_at + interval '2 minutes' END,
       CASE WHEN status = 'skipped' THEN skip_reason END
  FROM hist_plan;

-- A manual update now and then (asked for in the panel at 10:00, one in three hundred days).
INSERT INTO runs (agent_id, org_id, trigger, status, release_id, from_version, version, error,
                  requested_by, created_at, claimed_at, finished_at, outcome_reason, switched_at)
SELECT p.agent_id, p.org_id, 'manual', CASE WHEN p.v < 0.9 THEN 'succeeded' ELSE 'failed' END,
       p.release_id, p.from_version, CASE WHEN p.v < 0.9 THEN p.version END,
       CASE WHEN p.v >= 0.9 THEN 'update failed: download_failed' END, c.id,
       p.slot_at + interval '7 hours', p.slot_at + interval '7 hours 1 minute',
       p.slot_at + interval '7 hours 4 minutes',
       CASE WHEN p.v >= 0.9 THEN 'download_failed' END,
       CASE WHEN p.v < 0.9 THEN p.slot_at + interval '7 hours 3 minutes' END
  FROM hist_plan p JOIN credentials c ON c.org_id = p.org_id AND c.audience = 'panel'
 WHERE p.w > 0.9967 AND p.slot_key LIKE '%%T03:00';
"""  # noqa: S608 - constant fragments; values are bound

_WRITE_EVENTS = f"""
INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)
SELECT org_id, agent_id, id, 'update.scheduled', 'schedule', claimed_at,
       jsonb_build_object('slot_key', slot_key, 'from_version', from_version,
                          'to_version', version, 'renewed', false)
  FROM hist_plan WHERE status IN {_CLAIMED}
UNION ALL
SELECT r.org_id, r.agent_id, r.id, 'update.' || r.status, 'schedule', r.finished_at,
       CASE r.status
           WHEN 'missed' THEN jsonb_build_object('slot_key', r.slot_key, 'reason', r.miss_reason)
           WHEN 'up_to_date' THEN jsonb_build_object('slot_key', r.slot_key, 'version', r.version)
           WHEN 'skipped' THEN jsonb_build_object('slot_key', r.slot_key, 'reason',
                                                  r.skip_reason, 'release_version', p.version)
           ELSE jsonb_strip_nulls(jsonb_build_object(
                    'slot_key', r.slot_key, 'version', r.version, 'error', r.error,
                    'reason', r.outcome_reason,
                    'switched_at', to_char(r.switched_at AT TIME ZONE 'UTC',
                                           'YYYY-MM-DD"T"HH24:MI:SS"Z"')))
       END
  FROM hist_plan p JOIN runs r ON r.id = p.id;

INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, actor_id, actor_name, at, data)
SELECT r.org_id, r.agent_id, r.id, e.kind, e.actor_kind, e.actor_id, e.actor_name, e.at, e.data
  FROM runs r JOIN credentials c ON c.id = r.requested_by
 CROSS JOIN LATERAL (VALUES
       ('update.requested', 'user', c.id, c.name, r.created_at,
        jsonb_build_object('from_version', r.from_version)),
       ('update.started', 'agent', NULL::uuid, NULL::text, r.claimed_at,
        jsonb_build_object('to_version', r.version)),
       ('update.' || r.status, 'user', c.id, NULL::text, r.finished_at,
        jsonb_strip_nulls(jsonb_build_object('version', r.version, 'error', r.error,
                                             'reason', r.outcome_reason)))
 ) AS e(kind, actor_kind, actor_id, actor_name, at, data)
 WHERE r.trigger = 'manual' AND r.created_at >= %(from_at)s AND r.created_at < %(to_at)s;
"""  # noqa: S608 - constant fragments; values are bound

_WRITE_GRANTS = f"""
INSERT INTO tokens (run_id, agent_id, release_id, round_start, granted_at, expires_at,
                    revoked_at, revoked_reason)
SELECT r.id, r.agent_id, r.release_id, date_trunc('minute', r.claimed_at), r.claimed_at,
       r.claimed_at + interval '30 minutes', r.finished_at, 'finished'
  FROM runs r
 WHERE r.claimed_at IS NOT NULL AND r.created_at >= %(from_at)s AND r.created_at < %(to_at)s;

INSERT INTO claim_rounds_org (round_start, org_id, granted)
SELECT date_trunc('minute', claimed_at), org_id, count(*)
  FROM runs WHERE claimed_at IS NOT NULL AND created_at >= %(from_at)s AND created_at < %(to_at)s
 GROUP BY 1, 2;
INSERT INTO claim_rounds_global (round_start, granted)
SELECT date_trunc('minute', claimed_at), count(*)
  FROM runs WHERE claimed_at IS NOT NULL AND created_at >= %(from_at)s AND created_at < %(to_at)s
 GROUP BY 1;

-- The refusals behind throttled and braked misses, and those a granted agent met first.
INSERT INTO claim_refusals (agent_id, slot_key, reason, first_at)
SELECT agent_id, slot_key,
       CASE WHEN miss_reason = 'brake' THEN 'brake'
            WHEN v < 0.7 THEN 'org_cap' ELSE 'global_cap' END,
       slot_at + interval '20 seconds'
  FROM hist_plan
 WHERE miss_reason IN ('throttled', 'brake') OR (status IN {_CLAIMED} AND w > 0.8);
"""  # noqa: S608 - constant fragments; values are bound

# One review per organisation and slot; a notification where there was something to tell
# (a failure, a miss), queued for the organisation's webhook and delivered (a few failed).
_WRITE_REVIEWS = """
CREATE TEMP TABLE hist_review AS
SELECT org_id, slot_key, slot_at, gen_random_uuid() AS notification_id,
       count(*) AS agents,
       count(*) FILTER (WHERE status = 'succeeded') AS updated,
       count(*) FILTER (WHERE status = 'up_to_date') AS up_to_date,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       count(*) FILTER (WHERE status = 'rolled_back') AS rolled_back,
       count(*) FILTER (WHERE status = 'missed') AS missed,
       count(*) FILTER (WHERE status = 'unauthorised') AS unauthorised,
       count(*) FILTER (WHERE status = 'skipped') AS skipped
  FROM hist_plan GROUP BY org_id, slot_key, slot_at;

INSERT INTO notifications (id, org_id, slot_key, slot_at, created_at, body, read_at)
SELECT notification_id, org_id, slot_key, slot_at, slot_at + interval '20 minutes',
       jsonb_build_object(
           'kind', 'scheduled_updates',
           'slot', jsonb_build_object(
               'key', slot_key,
               'at', to_char(slot_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
               'local_time', to_char(slot_at AT TIME ZONE %(zone)s, 'YYYY-MM-DD"T"HH24:MI:SS'),
               'timezone', %(zone)s),
           'counts', jsonb_build_object(
               'agents', agents, 'updated', updated, 'up_to_date', up_to_date,
               'failed', failed, 'rolled_back', rolled_back, 'missed', missed,
               'no_outcome', 0, 'unauthorised', unauthorised, 'skipped', skipped),
           'updated', '[]'::jsonb, 'failed', '[]'::jsonb, 'missed', '[]'::jsonb,
           'stale', '[]'::jsonb),
       CASE WHEN hashtext(notification_id::text) %% 10 <> 0
            THEN slot_at + interval '9 hours' END
  FROM hist_review WHERE failed + rolled_back + missed + unauthorised > 0;

INSERT INTO slot_reviews (org_id, slot_key, slot_at, decided_at, notification_id)
SELECT v.org_id, v.slot_key, v.slot_at, v.slot_at + interval '20 minutes', n.id
  FROM hist_review v LEFT JOIN notifications n ON n.id = v.notification_id;

INSERT INTO agent_mentions (agent_id, local_day, kind, notification_id)
SELECT DISTINCT ON (p.agent_id, (p.slot_at AT TIME ZONE %(zone)s)::date)
       p.agent_id, (p.slot_at AT TIME ZONE %(zone)s)::date, 'failure', v.notification_id
  FROM hist_plan p
  JOIN hist_review v ON v.org_id = p.org_id AND v.slot_key = p.slot_key
 WHERE p.status IN ('failed', 'rolled_back', 'unauthorised')
 ORDER BY p.agent_id, (p.slot_at AT TIME ZONE %(zone)s)::date, p.slot_at
ON CONFLICT DO NOTHING;

INSERT INTO webhook_deliveries (notification_id, org_id, state, attempts, next_attempt_at,
                                last_error, delivered_at)
SELECT n.id, n.org_id,
       CASE WHEN hashtext(n.id::text) %% 50 = 0 THEN 'failed' ELSE 'delivered' END,
       CASE WHEN hashtext(n.id::text) %% 50 = 0 THEN 8 ELSE 1 END,
       NULL,
       CASE WHEN hashtext(n.id::text) %% 50 = 0 THEN 'connection refused' END,
       CASE WHEN hashtext(n.id::text) %% 50 <> 0 THEN n.created_at + interval '2 seconds' END
  FROM notifications n JOIN hist_review v ON v.notification_id = n.id
  JOIN webhooks h ON h.org_id = n.org_id;

INSERT INTO webhook_attempts (notification_id, attempt, at, url, status_code, error, outcome)
SELECT d.notification_id, g, n.created_at + make_interval(mins => g * g),
       h.url, CASE WHEN d.state = 'delivered' THEN 204 END,
       CASE WHEN d.state = 'failed' THEN 'connection refused' END,
       CASE WHEN d.state = 'delivered' THEN 'delivered'
            WHEN g = d.attempts THEN 'failed' ELSE 'retry' END
  FROM webhook_deliveries d JOIN hist_review v ON v.notification_id = d.notification_id
  JOIN notifications n ON n.id = d.notification_id JOIN webhooks h ON h.org_id = d.org_id
 CROSS JOIN LATERAL generate_series(1, d.attempts) g;
"""

# The operators' and customers' trail over the year: schedule changes, holds, credentials
# rotated, settings changed now and then; and each release's publication.
_WRITE_TRAIL = """
INSERT INTO events (org_id, agent_id, kind, actor_kind, actor_id, actor_name, at, data)
SELECT a.org_id, a.id, e.kind, 'user', c.id, c.name,
       s.slot_at + interval '6 hours' + make_interval(mins => a.n %% 300), e.data
  FROM hist_agent a
  JOIN hist_slot s ON s.time_k = 0
  JOIN credentials c ON c.org_id = a.org_id AND c.audience = 'panel'
 CROSS JOIN LATERAL (VALUES
       ('schedule.changed', jsonb_build_object('before', jsonb_build_object('times', a.times),
                                               'after', jsonb_build_object('times', a.times)))
 ) AS e(kind, data)
 WHERE (hashint8(a.n::bigint * 31 + s.k) & 1023) < 3;

INSERT INTO events (org_id, agent_id, kind, actor_kind, actor_name, at, data)
SELECT NULL, NULL, 'release.published', 'operator', 'cli:release', published_at,
       jsonb_build_object('version', agent_version, 'manifest_version', manifest_version,
                          'channel', channel, 'platform', platform, 'key_id', key_id)
  FROM releases
 WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.kind = 'release.published'
                    AND (e.data ->> 'manifest_version')::bigint = releases.manifest_version
                    AND e.data ->> 'channel' = releases.channel
                    AND e.data ->> 'platform' = releases.platform);

INSERT INTO events (kind, actor_kind, actor_name, at, data)
SELECT 'settings.changed', 'operator', 'cli:ops', slot_at + interval '10 hours',
       jsonb_build_object('before', jsonb_build_object('org_cap', 5),
                          'after', jsonb_build_object('org_cap', 5))
  FROM hist_slot WHERE time_k = 0 AND d %% 30 = 7;

UPDATE agents a SET current_version = o.version, last_seen_at = %(now)s,
                    online_since = %(now)s - interval '20 days',
                    previous_seen_at = %(now)s - interval '20 days 1 hour'
  FROM hist_agent h
  JOIN hist_offer o ON o.channel = h.channel AND o.platform = h.platform
   AND o.k = (SELECT max(k) FROM hist_slot)
 WHERE a.id = h.id;

UPDATE reconcile_progress SET reconciled_until = (SELECT max(slot_at) FROM hist_slot)
       + interval '15 minutes', last_pass_at = %(now)s, last_pass_by = 'history',
       passes = passes + %(days)s * 1440;
"""

# What the runs' counting trigger keeps, computed once over the runs it did not see, with its
# rule: an ending counted by (release, trigger, status, reason); an up_to_date run by the
# release of its pair with its version.
_RECOUNT = """
DELETE FROM run_ending_counts;
INSERT INTO run_ending_counts (release_id, trigger, status, reason, n)
SELECT coalesce(r.release_id, CASE WHEN r.status = 'up_to_date' THEN (
           SELECT rel.id FROM agent_tracks t
             JOIN releases rel ON rel.channel = t.channel AND rel.platform = t.platform
                              AND rel.agent_version = r.version
            WHERE t.agent_id = r.agent_id ORDER BY rel.manifest_version DESC LIMIT 1) END),
       r.trigger, r.status, coalesce(r.outcome_reason, r.skip_reason, r.miss_reason, ''),
       count(*)
  FROM runs r WHERE r.status NOT IN ('requested', 'claimed')
 GROUP BY 1, 2, 3, 4;
"""


def fill_history(database_url: str, history: History, *, progress: bool = True) -> None:
    """The year's runs, events, tokens, refusals, notifications and trail, for the fleet
    `seed_fleet` made (a month per transaction), then ANALYZE."""
    started = time.monotonic()
    first = datetime.combine(history.first_day, datetime.min.time(), UTC)
    now = datetime.combine(history.until + timedelta(days=1), datetime.min.time(), UTC)
    with psycopg.connect(
        database_url, autocommit=True, cursor_factory=psycopg.ClientCursor
    ) as conn:
        conn.execute("SET session_replication_role = replica")
        setup = {
            "first_day": history.first_day,
            "days": history.days,
            "zone": ZONE,
            "times": list(SLOT_TIMES[: history.slots]),
        }
        conn.execute(_SETUP, setup, prepare=False)
        conn.execute(_RELEASE_AT, prepare=False)
        for from_day in range(0, history.days, 30):
            to_day = min(history.days, from_day + 30)
            window = {
                "from_day": from_day,
                "to_day": to_day,
                "from_at": first + timedelta(days=from_day) - timedelta(hours=3),
                "to_at": first + timedelta(days=to_day) - timedelta(hours=3),
                "zone": ZONE,
            }
            with conn.transaction():
                conn.execute(_PLAN, window, prepare=False)
                conn.execute(_WRITE_RUNS, window, prepare=False)
                conn.execute(_WRITE_EVENTS, window, prepare=False)
                conn.execute(_WRITE_GRANTS, window, prepare=False)
                conn.execute(_WRITE_REVIEWS, window, prepare=False)
                conn.execute("DROP TABLE hist_plan; DROP TABLE hist_review")
            if progress:
                print(
                    f"  days {from_day}-{to_day - 1} written ({time.monotonic() - started:.0f} s)",
                    flush=True,
                )
        with conn.transaction():
            conn.execute(_WRITE_TRAIL, {"now": now, "days": history.days}, prepare=False)
            conn.execute(_RECOUNT, prepare=False)
            recount_history_figures(conn)
        conn.execute("VACUUM ANALYZE")
    if progress:
        print(f"history written in {time.monotonic() - started:.0f} s", flush=True)


def recount_history_figures(conn: psycopg.Connection[object]) -> None:
    """The figures `/metrics` keeps as rows are written (tokens granted, notifications, refusal
    facts, webhook deliveries and attempts), counted once over rows written without triggers."""
    exists = conn.execute("SELECT to_regclass('history_counts') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return
    conn.execute(
        """
        DELETE FROM history_counts;
        INSERT INTO history_counts (figure, label, n)
        SELECT 'tokens_granted', '', count(*) FROM tokens
        UNION ALL SELECT 'notifications', '', count(*) FROM notifications
        UNION ALL SELECT 'claim_refusals', reason, count(*) FROM claim_refusals GROUP BY reason
        UNION ALL SELECT 'webhook_deliveries', state, count(*) FROM webhook_deliveries
                   GROUP BY state
        UNION ALL SELECT 'webhook_attempts', outcome, count(*) FROM webhook_attempts
                   GROUP BY outcome;
        """,
        prepare=False,
    )


def sizes(database_url: str) -> list[tuple[str, int, int]]:
    """(table, rows, bytes with indexes) of the history's tables, and the database's bytes."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT c.relname, c.reltuples::bigint, pg_total_relation_size(c.oid)"
            " FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace"
            " WHERE s.nspname = 'public' AND c.relkind = 'r'"
            " ORDER BY pg_total_relation_size(c.oid) DESC LIMIT 12"
        ).fetchall()
        total = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    assert total is not None
    return [(str(name), int(n), int(b)) for name, n, b in rows] + [("(database)", 0, int(total[0]))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="a migrated, empty database")
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--orgs", type=int, default=250)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--slots", type=int, choices=(1, 2), default=1)
    parser.add_argument("--until", type=date.fromisoformat, default=date(2026, 11, 29))
    parser.add_argument("--scale", type=float, help="instead of --agents/--orgs/--days")
    parser.add_argument("--fleet-only", action="store_true", help="the fleet, no history")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/nachtwacht-history"))
    args = parser.parse_args()
    history = (
        History.scaled(args.scale)
        if args.scale
        else History(
            agents=args.agents,
            orgs=args.orgs,
            days=args.days,
            slots=args.slots,
            until=args.until,
        )
    )
    args.workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"fleet: {history.agents} agents in {history.orgs} organisations …", flush=True)
    seed_fleet(args.database_url, history, args.workdir)
    print(f"fleet seeded in {time.monotonic() - started:.0f} s", flush=True)
    if not args.fleet_only:
        print(f"history: {history.days} days, {history.slots} slot(s) a day …", flush=True)
        fill_history(args.database_url, history)
    for name, n, size in sizes(args.database_url):
        print(f"{name:24} {n:>12,} rows {size / 2**20:10.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
