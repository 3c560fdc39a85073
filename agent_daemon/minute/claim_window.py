"""Until when a granted claim may still be carried on: pure, `now` passed in.

A claim is the token of one run. It may switch `current` only inside its slot's catch-up window
(a 03:00 update never happens at 09:00; the window's end is `Slot.window_closes`, recorded with
the claim) and while its token lasts (60 minutes), whichever ends first; a manual run has no
window, only its token. After that the run ends with its reason and nothing is switched.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from agent_daemon.disk.daemon_state import ClaimInProgress
from ground.contract import OutcomeReason
from ground.limits import DEFAULT_CATCH_UP_MINUTES

__all__ = ["claim_deadline", "claim_is_open", "end_reason"]


def claim_deadline(claim: ClaimInProgress) -> datetime:
    """The instant after which this run is never switched."""
    ends = [at for at in (claim.window_closes_at, claim.token_expires_at) if at is not None]
    if not ends:
        # A claim recorded before its window was: the default window from its claim.
        ends.append(claim.claimed_at + timedelta(minutes=DEFAULT_CATCH_UP_MINUTES))
    return min(ends)


def claim_is_open(claim: ClaimInProgress, now: datetime) -> bool:
    return now < claim_deadline(claim)


def end_reason(claim: ClaimInProgress) -> OutcomeReason:
    """Why a run whose window closed before it finished ended: the last failure that might have
    passed, else an interruption (the daemon was stopped, the host was down)."""
    return claim.last_reason or OutcomeReason.INTERRUPTED
