"""Retention: history older than the platform's `retention_days` is removed, a little at a time.

The reconcile worker (one replica, the advisory lock's holder) walks the fleet after its other
steps: every agent's expired runs with their events, its expired claim refusals and its expired
reports of slots it could not reach the control plane in (`unreachable_reports`); every
organisation's expired notifications (their webhook deliveries and agent mentions with them) and
slot reviews; the caps' expired round counters; and, whatever `retention_days` says, the
sign-in failures of addresses not tried for a day (sign-in has forgotten them). Each transaction
removes at most `rows` rows of one table; a tick does at most `transactions_per_tick` of them,
pausing between, and the walk goes on at the next tick where the stored progress says it stands.

What is never removed, whatever its age:
    - a run still in flight (`requested`, `claimed`): it ends as the product ends runs;
    - each agent's newest run, newest scheduled run and newest run that reported a version: the
      panel's "last update", the next slot's reckoning and "which agents run a withdrawn version"
      read them;
    - the runs a release halt names as its evidence;
    - every event without a run: the trail of what people and the control plane did (schedule
      changes, the brake, releases, halts, pins, credentials, settings, enrollment);
    - organisations, agents, credentials, releases and their builds, halts, pins, trust roots.

    batches     `RetentionBatches`: how much one transaction and one tick may remove
    data        the SQL: which rows have expired, their removal, the stored progress
    walk        `RetentionWalk.tick(now)`: one tick's share of the walk; `RetentionTick`
    standing    `RetentionStanding`, read for /metrics
"""

from __future__ import annotations

from control_plane.retention.batches import RetentionBatches
from control_plane.retention.standing import RetentionStanding, read_standing
from control_plane.retention.walk import RetentionTick, RetentionWalk

__all__ = [
    "RetentionBatches",
    "RetentionStanding",
    "RetentionTick",
    "RetentionWalk",
    "read_standing",
]
