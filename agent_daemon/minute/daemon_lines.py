"""The daemon's log lines that need words: why a minute waits, what a consumed slot means.

`log_wait` writes the one line of a minute that ends in `decide`'s `Wait` — the platform
unavailable, a refused or unanswered claim, the brake, or a reach that failed — and
`slot_gone_meaning` words a refusal that consumed the slot (`claim.slot_gone`).
"""

from __future__ import annotations

from agent_daemon.host.event_log import EventLog, Level
from agent_daemon.minute.decision import ClaimRequestAction, ClaimSlot, TickResult, Wait
from ground.contract import RefusalCode

__all__ = ["about", "error_fields", "log_wait", "slot_gone_meaning"]

# The log line of a minute whose reach failed, by reason; a refused or unanswered claim is logged
# with its code or error instead (see `log_wait`).
_WAIT_EVENTS: dict[str, tuple[str, Level]] = {
    "offline": ("control_plane.offline", "warning"),
    "credential_refused": ("control_plane.credential_refused", "error"),
    "bad_config": ("config.invalid", "error"),
}

# What a slot-consuming refusal means, in words for the journal (`claim.slot_gone`).
_SLOT_GONE_WORDS: dict[RefusalCode, str] = {
    RefusalCode.RELEASE_ROLLED_BACK: "this host rolled the offered release back: nothing to do "
    "until a newer release is published or an operator asks for a retry",
    RefusalCode.HELD: "the agent is held: this slot is skipped",
    RefusalCode.RELEASE_HALTED: "the offered release is stopped by the operators: this slot is "
    "skipped, the next one asks again",
    RefusalCode.WINDOW_CLOSED: "the slot's window had closed on the control plane's clock, or too "
    "little of it was left for a download to finish in it",
    RefusalCode.SLOT_CONSUMED: "the control plane had already recorded this slot",
    RefusalCode.NOT_A_SLOT: "the control plane does not know this slot in the schedule",
}


def log_wait(log: EventLog, action: Wait) -> TickResult:
    """The line of a minute that waits; its result is the wait's reason."""
    fields = {} if action.request is None else about(action.request)
    if action.reason == "platform_unavailable":
        # The control plane answered that it cannot serve (its database is down): our
        # outage, not this host being offline, not a refusal and not a full round.
        log.emit(
            "platform.unavailable",
            level="warning",
            **fields,
            step="claim" if action.request is not None else "config",
            error=action.error,
        )
    elif action.detail is not None:
        log.emit(
            "claim.refused",
            level="warning",
            **fields,
            code=action.detail.code,
            retry_after_seconds=action.detail.retry_after_seconds,
            detail=action.detail.message,
        )
    elif action.request is not None:
        log.emit("claim.offline", level="warning", **fields, error=action.error)
    elif action.reason == "braked":
        slot_key = None if action.slot is None else action.slot.key
        log.emit("claim.braked", level="warning", slot_key=slot_key, reason=action.error)
    elif action.reason in _WAIT_EVENTS and action.error is not None:
        event, level = _WAIT_EVENTS[action.reason]
        log.emit(event, level=level, error=action.error)
    return action.reason


def slot_gone_meaning(refusal: RefusalCode) -> str:
    return _SLOT_GONE_WORDS.get(refusal, "the control plane consumed the slot")


def about(action: ClaimRequestAction) -> dict[str, str]:
    """The log fields naming what a claim was for."""
    if isinstance(action, ClaimSlot):
        return {"slot_key": action.slot.key}
    return {"run_id": action.run_id}


def error_fields(exc: BaseException) -> dict[str, object]:
    return {"error_type": type(exc).__name__, "error": str(exc)}
