"""The question the updater asks immediately before it switches `current`: may I, still?

Revocation is honoured up to the swap: the brake, a halt or a withdrawal revokes the
run's token while its build downloads; the updater must not switch to it afterwards. The updater
knows nothing of the control plane's API, so the daemon hands it a `ConfirmSwap` with the request;
the daemon's one asks `POST confirm_path(run_id)` and answers with one of:

    SwapAllowed     200 SwapPermit: switch now; `at` is the control plane's time, as this host
                    knows it, reported as the run's `switched_at`
    SwapRefused     the token was revoked or expired, or the window closed: the run ends here,
                    nothing switched, the staged build removed
    SwapUnanswered  no answer, a 5xx, `database_unavailable`: do not switch; the staged build is
                    kept and the same run asks again on a later minute while its window is open

Only `SwapAllowed` lets the updater switch. An update without a `ConfirmSwap` (the first install,
a tool run by hand) switches unasked; the daemon never sends one without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from ground.contract import OutcomeReason

__all__ = ["ConfirmSwap", "SwapAllowed", "SwapRefused", "SwapUnanswered", "SwapVerdict"]


@dataclass(frozen=True, kw_only=True)
class SwapAllowed:
    at: datetime


@dataclass(frozen=True, kw_only=True)
class SwapRefused:
    reason: OutcomeReason
    error: str


@dataclass(frozen=True, kw_only=True)
class SwapUnanswered:
    reason: OutcomeReason
    error: str


SwapVerdict = SwapAllowed | SwapRefused | SwapUnanswered
ConfirmSwap = Callable[[], SwapVerdict]
