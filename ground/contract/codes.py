"""Every code the control plane answers an agent with, and what each means for the slot.

DESIGN.md rule 8 asks one question of each refusal: does it consume the slot? The answer lives
here, once, as `RefusalCode.consumes_slot`; the daemon, the simulated fleet, the test fake and the
control plane's routes all ask it and never re-derive it from a status code.

    code            status  consumes the slot   why
    not_a_slot      422     yes                 the server's planner knows no such open slot
    window_closed   409     yes                 the catch-up window has passed (rule 7)
    slot_consumed   409     yes                 a run already holds this slot
    brake           503     no                  the operators' brake: retry next minute
    org_cap         429     no                  this organisation's round is full
    global_cap      429     no                  the platform's round is full
    no_release      409     no                  nothing published yet: nothing to do, nothing lost
    run_not_found   404     (manual)            the manual update is not this agent's
    run_finished    409     (manual)            the manual update already ended

A manual update is not a slot; its refusals end that request and consume nothing scheduled.
"""

from __future__ import annotations

import enum

__all__ = ["AnswerCode", "RefusalCode"]


class RefusalCode(enum.StrEnum):
    """Why a claim (`POST /v1/agent/claims`) was refused."""

    NOT_A_SLOT = "not_a_slot"
    WINDOW_CLOSED = "window_closed"
    SLOT_CONSUMED = "slot_consumed"
    BRAKE = "brake"
    ORG_CAP = "org_cap"
    GLOBAL_CAP = "global_cap"
    NO_RELEASE = "no_release"
    RUN_NOT_FOUND = "run_not_found"
    RUN_FINISHED = "run_finished"

    @property
    def status(self) -> int:
        """The HTTP status the control plane answers this refusal with."""
        return _STATUS[self]

    @property
    def consumes_slot(self) -> bool:
        """The slot is gone for good: record it locally and stop asking (DESIGN.md rule 8)."""
        return self in _CONSUMES_SLOT

    @property
    def is_cap(self) -> bool:
        """A full round: retry in the next round, after `retry_after_seconds`."""
        return self in {RefusalCode.ORG_CAP, RefusalCode.GLOBAL_CAP}


_STATUS = {
    RefusalCode.NOT_A_SLOT: 422,
    RefusalCode.WINDOW_CLOSED: 409,
    RefusalCode.SLOT_CONSUMED: 409,
    RefusalCode.BRAKE: 503,
    RefusalCode.ORG_CAP: 429,
    RefusalCode.GLOBAL_CAP: 429,
    RefusalCode.NO_RELEASE: 409,
    RefusalCode.RUN_NOT_FOUND: 404,
    RefusalCode.RUN_FINISHED: 409,
}

_CONSUMES_SLOT = frozenset(
    {RefusalCode.NOT_A_SLOT, RefusalCode.WINDOW_CLOSED, RefusalCode.SLOT_CONSUMED}
)


class AnswerCode(enum.StrEnum):
    """The other codes an agent may be answered with (`{"detail": {"code": …}}`)."""

    # GET /v1/agent/runs/{id}/artifact: the run's token can no longer download (403).
    TOKEN_REVOKED = "token_revoked"  # noqa: S105 (a code naming a token, not a secret)
    TOKEN_EXPIRED = "token_expired"  # noqa: S105 (a code naming a token, not a secret)
    # PATCH /v1/agent/runs/{id}: an outcome for a run this agent does not hold (409).
    RUN_NOT_CLAIMED = "run_not_claimed"
    RUN_NOT_FOUND = "run_not_found"
    AGENT_NOT_FOUND = "agent_not_found"
    # Any request: the body broke a rule (422), or the database is down (503: retry later; it is
    # the platform that is unavailable, never the agent that is offline).
    INVALID_REQUEST = "invalid_request"
    # Any request: a body larger than the control plane accepts (413), refused before parsing.
    REQUEST_TOO_LARGE = "request_too_large"
    DATABASE_UNAVAILABLE = "database_unavailable"
