"""What the daemon hands the updater (`UpdateRequest`) and what it gets back (`UpdateOutcome`).

Kept apart from `updater.py` so the daemon can name them without loading the updater itself:
an idle daemon never imports the download, install and verification code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from agent_daemon.updater.swap_gate import ConfirmSwap
from ground.contract import OutcomeReason, PatchFallbackReason

__all__ = ["OnProgress", "Status", "SwitchUnderWay", "UpdateOutcome", "UpdateRequest"]


class OnProgress(Protocol):
    """How far a long step has come: `download` in bytes, `health` in product seconds waited of
    the deadline. `version` is the version the step is about when it is not the release being
    installed — the old version health-checked after a rollback."""

    def __call__(
        self, step: str, done: float, total: float, *, version: str | None = None
    ) -> None: ...


Status = Literal["succeeded", "failed", "rolled_back"]


@dataclass(frozen=True, kw_only=True)
class UpdateRequest:
    run_id: str
    manifest: bytes
    signature: bytes
    artifact_url: str  # absolute URL
    # Asked immediately before the switch; only `SwapAllowed` lets it happen (`swap_gate`).
    # None: no control plane to ask (a first install, a tool run by hand).
    confirm_swap: ConfirmSwap | None = None


@dataclass(frozen=True, kw_only=True)
class UpdateOutcome:
    status: Status
    version: str | None  # the version running afterwards
    error: str | None
    run_id: str
    # Why it ended so; None for a plain success.
    reason: OutcomeReason | None = None
    # When the switch was allowed (the control plane's time as this host knew it), for a run that
    # switched; None when nothing switched.
    switched_at: datetime | None = None
    # The failure may pass: nothing switched, and the same run may be applied again (its partial
    # download or staged build kept) while its window is open.
    retry: bool = False
    # What happened on the way that the status does not say: a patch this host's base could use
    # that was not used, and why (the full artifact was installed instead).
    notes: tuple[str, ...] = ()
    # How the build came: `patch` (from this host's base) or `full`, and why a patch its release
    # offered was not used; None when nothing was downloaded.
    delivery: Literal["patch", "full"] | None = None
    fallback_reason: PatchFallbackReason | None = None


@dataclass(frozen=True, kw_only=True)
class SwitchUnderWay:
    """A self-update switched to the new build of the updater, uncommitted: the run's outcome is
    not known yet. The new build reports it once it checks in, or the old one once the guard has
    taken the switch back (`self_update.pending_switch`)."""

    run_id: str
    version: str
    switched_at: datetime | None
