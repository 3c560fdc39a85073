"""The outcome of a self-update, as the run's report says it.

The daemon that switched to a new build of the updater stops before it knows how the switch ends
(`dispatch`); the build that learns it reports it for the run kept beside the switch:

    committed (the new build checked in)       succeeded, the new version
    rolled_back, switch_interrupted            failed, `interrupted`: the new build never ran,
                                               the release may be offered again
    rolled_back, any other reason of the guard rolled_back, `health_check_failed`: the new
    (exited_at_start, crash_loop,              build did not check in in time; the guard's own
    never_checked_in)                          word is in the error, for the operator

The contract's reasons are kept as they are (a control plane of this contract refuses a reason it
does not know); the guard's word travels in the error text.
"""

from __future__ import annotations

from agent_daemon.self_update.pending_switch import SwitchReport
from agent_daemon.updater.update_records import UpdateOutcome
from ground.contract import OutcomeReason

__all__ = ["SWITCH_INTERRUPTED", "switch_outcome"]

# The guard's reason for a switch killed before `current` moved.
SWITCH_INTERRUPTED = "switch_interrupted"


def switch_outcome(report: SwitchReport) -> UpdateOutcome | None:
    """The run's outcome, or None when the switch was not the daemon's (made by hand)."""
    run = report.run
    if run is None:
        return None
    record = report.outcome
    if record.outcome == "committed":
        return UpdateOutcome(
            status="succeeded",
            version=record.running_version,
            error=None,
            run_id=run.run_id,
            switched_at=run.switched_at,
        )
    failed, restored = record.failed_version, record.running_version
    guard_reason = record.reason or "interrupted"
    if guard_reason == SWITCH_INTERRUPTED:
        return UpdateOutcome(
            status="failed",
            version=restored,
            error=(
                f"the switch of nachtwacht's own agent to {failed} was interrupted before that "
                f"build ran ({guard_reason}); {restored} kept running"
            ),
            run_id=run.run_id,
            reason=OutcomeReason.INTERRUPTED,
        )
    return UpdateOutcome(
        status="rolled_back",
        version=restored,
        error=(
            f"nachtwacht's own agent {failed} did not check in ({guard_reason}); the guard went "
            f"back to {restored}"
        ),
        run_id=run.run_id,
        reason=OutcomeReason.HEALTH_CHECK_FAILED,
        switched_at=run.switched_at,
    )
