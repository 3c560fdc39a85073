"""A claim never outlives its window: a scheduled run still `claimed` once its window,
its token's whole lifetime and `OUTLIVED_MARGIN` are over is ended by the worker.

Nothing can still happen under such a claim: the server refuses its permit, its download and a
switch reported for it. Left alone it would stay `claimed` for ever — the agent page "in progress"
for a night long gone, the slot's review waiting on it. So it becomes `failed` with reason
`interrupted` (`OutcomeReason.INTERRUPTED`: the update did not finish inside its window) and
`outcome_inferred`, with an `update.failed` event saying the worker inferred it. A report that
arrives later (an outbox emptied after an outage) replaces the inference, judged as any outcome
is: a switch inside the lease becomes the success it was, one outside it `unauthorised`.

A manual run has no window; its lease is renewed by claiming again, so it is left alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from control_plane.claims.grant import TOKEN_LIFETIME
from control_plane.types import Connection
from ground.contract import OutcomeReason
from shared_planner import latest_closed_slot

__all__ = ["OUTLIVED_MARGIN", "end_outlived_claims"]

# "Well after": beyond the token's lifetime by this much, so the slot's review (which waits for a
# silent run `outcome_grace`, as long as a token lives) has listed the run as without an outcome
# first, and an agent whose clock runs a little behind ours is not cut off mid-report.
OUTLIVED_MARGIN = timedelta(minutes=15)

_END = """
WITH ended AS (
    UPDATE runs
       SET status = 'failed', outcome_reason = %(reason)s, outcome_inferred = true,
           finished_at = %(now)s
     WHERE trigger = 'schedule' AND status = 'claimed'
       AND slot_at <= %(opened_before)s
    RETURNING id, org_id, agent_id, slot_key
)
INSERT INTO events (org_id, agent_id, run_id, kind, actor_kind, at, data)
SELECT org_id, agent_id, id, 'update.failed', 'schedule', %(now)s,
       jsonb_build_object('slot_key', slot_key, 'reason', %(reason)s::text, 'inferred', true)
  FROM ended
"""


def end_outlived_claims(
    conn: Connection, *, window: timedelta, until: datetime, now: datetime
) -> int:
    """End the scheduled claims whose window and token lifetime were over by `until`; returns
    how many. Safe to repeat: an ended run is no longer `claimed`."""
    return conn.execute(
        _END,
        {
            "reason": OutcomeReason.INTERRUPTED.value,
            # The window closed, and the token's lifetime and the margin passed, by `until`.
            "opened_before": latest_closed_slot(until - TOKEN_LIFETIME - OUTLIVED_MARGIN, window),
            "now": now,
        },
    ).rowcount
