"""The daemon's answer to the updater's last question before a switch: may this run still switch?

Revocation is honoured up to the swap. `SwapConfirmation` is the `ConfirmSwap` the
daemon hands the updater with each request: it asks the control plane `POST confirm_path(run_id)`
and turns the answer into a verdict (`agent_daemon.updater.swap_gate`):

    200 SwapPermit for this run        SwapAllowed(at = the control plane's time, as known here)
    a refusal with a code              SwapRefused: token_revoked / token_expired kept; a closed
                                       window ends the run with its last failure, or
                                       window_closed when none came before
    no answer, 5xx, 401, unreadable    SwapUnanswered (platform_unavailable): do not switch now,
                                       ask again next minute while the window is open

Each verdict is one log line (`swap.permitted`, `swap.refused`, `swap.unconfirmed`).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_daemon.connection import wire
from agent_daemon.connection.control_plane_client import ControlPlaneClient
from agent_daemon.connection.server_clock import ServerClock
from agent_daemon.disk.daemon_state import ClaimInProgress
from agent_daemon.errors import BadServerAnswer, ControlPlaneUnreachable, CredentialRefused
from agent_daemon.host.event_log import EventLog
from agent_daemon.updater.swap_gate import SwapAllowed, SwapRefused, SwapUnanswered, SwapVerdict
from ground.contract import ErrorDetail, OutcomeReason, format_instant

__all__ = ["SwapConfirmation"]


@dataclass(frozen=True, kw_only=True)
class SwapConfirmation:
    control: ControlPlaneClient
    clock: ServerClock
    log: EventLog
    claim: ClaimInProgress

    def __call__(self) -> SwapVerdict:
        claim = self.claim
        about: dict[str, object] = {"slot_key": claim.slot_key, "run_id": claim.run_id}
        try:
            answer = self.control.confirm_swap(claim.run_id)
        except (ControlPlaneUnreachable, CredentialRefused, BadServerAnswer) as exc:
            self.log.emit("swap.unconfirmed", level="warning", **about, error=str(exc))
            return SwapUnanswered(reason=OutcomeReason.PLATFORM_UNAVAILABLE, error=str(exc))
        if isinstance(answer, ErrorDetail):
            reason = wire.swap_refusal_reason(answer)
            if reason is OutcomeReason.WINDOW_CLOSED:
                # The window closed on the control plane's clock: why the run could not finish
                # in it is the last failure that might have passed, when there was one.
                reason = claim.last_reason or OutcomeReason.WINDOW_CLOSED
            self.log.emit(
                "swap.refused",
                level="warning",
                **about,
                code=answer.code,
                reason=reason,
                detail=answer.message,
            )
            return SwapRefused(
                reason=reason,
                error=f"the control plane refused the switch: {answer.code} ({answer.message})",
            )
        if str(answer.run_id) != claim.run_id:
            # A permit for another run permits nothing here.
            error = f"the swap permit names run {answer.run_id}, not {claim.run_id}"
            self.log.emit("swap.unconfirmed", level="warning", **about, error=error)
            return SwapUnanswered(reason=OutcomeReason.PLATFORM_UNAVAILABLE, error=error)
        at = self.clock.now()
        self.log.emit("swap.permitted", level="info", **about, at=format_instant(at))
        return SwapAllowed(at=at)
