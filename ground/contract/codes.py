"""Every code the control plane answers an agent with, and what each means for the slot.

Each refusal answers one question: does it consume the slot? The answer lives
here, once, as `RefusalCode.consumes_slot`; the daemon, the simulated fleet, the test fake and the
control plane's routes all ask it and never re-derive it from a status code.

    code            status  consumes the slot   why
    not_a_slot      422     yes                 the server's planner knows no such open slot
    window_closed   409     yes                 the catch-up window has passed, or a new
                                                token is asked in its last grant margin
                                                (a platform setting, 60 s by default), too
                                                late for its download to finish in it
    slot_consumed   409     yes                 a run already holds this slot
    brake           503     no                  the operators' brake: retry next minute
    org_cap         429     no                  this organisation's round is full
    global_cap      429     no                  the platform's round is full
    no_release      409     no                  nothing published yet: nothing to do, nothing lost
    held            409     yes                 the agent is held (its customer, an operator or
                                                the host's `agent hold`): skipped, reason `held`
    release_rolled_back 409 yes                 this host rolled the offered release back: nothing
                                                to do until a newer one or an operator's retry
    release_halted  409     yes                 the offered release is halted (automatically on
                                                errors, or by an operator) or under its own
                                                brake: nothing to do tonight, the slot is
                                                skipped with that reason and the next slot asks
                                                again (an agent that still retries it is
                                                answered the same while the halt lasts)
    run_not_found   404     (manual)            the manual update is not this agent's
    run_finished    409     (manual)            the manual update already ended

When several apply, a scheduled claim is answered the first in this order: what stops the
agent whatever the slot (`brake`, then `held`, `release_halted`, `release_rolled_back`), then
whether the slot is still there (`not_a_slot`, `window_closed`, `slot_consumed`), then whether a
new token would still be in time (`window_closed` in the grant margin; the same claim asked
again keeps its grant), then the caps (`org_cap`, `global_cap`); `no_release` is found by the
grant itself.

A manual update is not a slot; its refusals end that request and consume nothing scheduled.
"""

from __future__ import annotations

import enum
from typing import TypeVar

__all__ = [
    "ENDED_BY_CONTROL_PLANE",
    "NOT_THE_BUILDS_FAILURE",
    "AnswerCode",
    "MissReason",
    "OfferReason",
    "OutcomeReason",
    "PatchFallbackReason",
    "RefusalCode",
    "reason_for_contract",
    "stored_code",
]

_Code = TypeVar("_Code", bound=enum.StrEnum)


def stored_code(kind: type[_Code], value: str | None) -> _Code | str | None:
    """A code read back from the database: the member of `kind`, or the text as it is when a newer
    release (a replica already upgraded) recorded a value this one does not know yet. Such a value
    is shown as it is (the panel words it "reason unknown"), never an error. None stays None."""
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        return value


class RefusalCode(enum.StrEnum):
    """Why a claim (`POST /v1/agent/claims`) was refused."""

    NOT_A_SLOT = "not_a_slot"
    WINDOW_CLOSED = "window_closed"
    SLOT_CONSUMED = "slot_consumed"
    BRAKE = "brake"
    ORG_CAP = "org_cap"
    GLOBAL_CAP = "global_cap"
    NO_RELEASE = "no_release"
    HELD = "held"
    RELEASE_ROLLED_BACK = "release_rolled_back"
    RELEASE_HALTED = "release_halted"
    RUN_NOT_FOUND = "run_not_found"
    RUN_FINISHED = "run_finished"

    @property
    def status(self) -> int:
        """The HTTP status the control plane answers this refusal with."""
        return _STATUS[self]

    @property
    def consumes_slot(self) -> bool:
        """The slot is gone for good: record it locally and stop asking."""
        return self in _CONSUMES_SLOT

    @property
    def is_brake(self) -> bool:
        """An operator's stop (the brake, or a halt of this release). The brake is retried next
        minute; a halt consumes the slot (`consumes_slot`, asked first)."""
        return self in {RefusalCode.BRAKE, RefusalCode.RELEASE_HALTED}

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
    RefusalCode.HELD: 409,
    RefusalCode.RELEASE_ROLLED_BACK: 409,
    RefusalCode.RELEASE_HALTED: 409,
    RefusalCode.RUN_NOT_FOUND: 404,
    RefusalCode.RUN_FINISHED: 409,
}

_CONSUMES_SLOT = frozenset(
    {
        RefusalCode.NOT_A_SLOT,
        RefusalCode.WINDOW_CLOSED,
        RefusalCode.SLOT_CONSUMED,
        RefusalCode.HELD,
        RefusalCode.RELEASE_ROLLED_BACK,
        RefusalCode.RELEASE_HALTED,
    }
)


class AnswerCode(enum.StrEnum):
    """The other codes an agent may be answered with (`{"detail": {"code": …}}`)."""

    # GET /v1/agent/runs/{id}/artifact: the run's token can no longer download (403).
    TOKEN_REVOKED = "token_revoked"  # noqa: S105 (a code naming a token, not a secret)
    TOKEN_EXPIRED = "token_expired"  # noqa: S105 (a code naming a token, not a secret)
    # PATCH /v1/agent/runs/{id}: an outcome for a run this agent does not hold (409).
    RUN_NOT_CLAIMED = "run_not_claimed"
    # PATCH /v1/agent/runs/{id} (409): a switch the control plane did not authorise — its token was
    # revoked or had expired, or the window had closed, before the switch. The run is recorded as
    # what it is (`unauthorised`), never as a normal success; the agent stops reporting it.
    OUTCOME_NOT_AUTHORISED = "outcome_not_authorised"
    RUN_NOT_FOUND = "run_not_found"
    AGENT_NOT_FOUND = "agent_not_found"
    # Any request: the body broke a rule (422), or the database is down (503: retry later; it is
    # the platform that is unavailable, never the agent that is offline).
    INVALID_REQUEST = "invalid_request"
    # Any request: a body larger than the control plane accepts (413), refused before parsing.
    REQUEST_TOO_LARGE = "request_too_large"
    DATABASE_UNAVAILABLE = "database_unavailable"
    # POST /v1/agent/enroll: the enrollment token is unknown or revoked (401), past its expiry
    # (401), or has no use left (401); the agent name breaks the token's name pattern (422) or is
    # already an agent of the organisation (409). Each is one line for the admin at the host.
    ENROLLMENT_TOKEN_REFUSED = "enrollment_token_refused"  # noqa: S105 (a code, not a secret)
    ENROLLMENT_TOKEN_EXPIRED = "enrollment_token_expired"  # noqa: S105 (a code, not a secret)
    ENROLLMENT_TOKEN_USED_UP = "enrollment_token_used_up"  # noqa: S105 (a code, not a secret)
    AGENT_NAME_NOT_ALLOWED = "agent_name_not_allowed"
    AGENT_EXISTS = "agent_exists"
    # Any agent request (400): the agent's `CONTRACT_VERSION_HEADER` names a contract older than
    # the oldest this control plane still serves. The message names both versions; the host's
    # agent must be upgraded (nothing else it sends is read).
    CONTRACT_TOO_OLD = "contract_too_old"


class OutcomeReason(enum.StrEnum):
    """Why a claimed run ended as it did (`OutcomeReport.reason`), in words the panel translates.

    The agent names the reason; the control plane stores it beside the status, so a customer reads
    "failed: the control plane was unavailable until the window closed", never "offline".
    """

    # The control plane (or its database) answered 5xx / not at all until the window closed.
    PLATFORM_UNAVAILABLE = "platform_unavailable"
    # The update was interrupted (daemon stopped, host down) and its window closed before it could
    # go on: rolled back to a safe state, never switched outside the window.
    INTERRUPTED = "interrupted"
    # The token was revoked (the brake, a halt, a withdrawal) or expired before the switch.
    TOKEN_REVOKED = "token_revoked"  # noqa: S105 (a code naming a token, not a secret)
    TOKEN_EXPIRED = "token_expired"  # noqa: S105 (a code naming a token, not a secret)
    # The state directory or the install root had no room.
    DISK_FULL = "disk_full"
    # Transient download failures until the window closed.
    DOWNLOAD_FAILED = "download_failed"
    # The signature, hash, length, channel, platform or age check refused the build.
    VERIFICATION_FAILED = "verification_failed"
    # Unpacking, the self-test or the swap failed; the running version kept running.
    INSTALL_FAILED = "install_failed"
    # The new version was not healthy within its deadline: rolled back.
    HEALTH_CHECK_FAILED = "health_check_failed"
    # The control plane refused the switch because the slot's window had closed before the build
    # was ready, with no failure on the way (a download slower than the window left): nothing
    # switched. Sent to control planes of contract 5 and newer; older ones are told `interrupted`.
    WINDOW_CLOSED = "window_closed"


# The reasons a run ended `failed` because the control plane stopped it before its switch (the
# brake, a halt or a withdrawal revoked its token; its window closed on the control plane's clock).
# They say nothing of the build: such a run counts towards no automatic halt, and `/metrics`
# counts it as `refused`, not `failed`.
ENDED_BY_CONTROL_PLANE = frozenset({OutcomeReason.TOKEN_REVOKED, OutcomeReason.WINDOW_CLOSED})

# The reasons a `failed` run says nothing of its build, so it counts towards no automatic halt:
# those above, the control plane unavailable until the window closed (an outage on the
# platform's side, always before the switch; after an outage many runs end so at once, and a good
# release must not be halted for it), and a download that failed (the build's bytes never came:
# a cut or stalled connection, a proxy's or captive portal's page or redirect where the build was
# expected — one customer's network must not halt a release for everyone; bytes that came and
# are not the signed build are `verification_failed`, which counts). `/metrics` still counts
# these runs as `failed`.
NOT_THE_BUILDS_FAILURE = ENDED_BY_CONTROL_PLANE | {
    OutcomeReason.PLATFORM_UNAVAILABLE,
    OutcomeReason.DOWNLOAD_FAILED,
}

# The reasons added after the first contracts: the contract version that added each, and the
# reason a program of an older contract is told in its place (it refuses a reason it does not
# know: a control plane answers 422, an agent's state file becomes unreadable).
_NEWER_REASONS: dict[OutcomeReason, tuple[int, OutcomeReason]] = {
    OutcomeReason.WINDOW_CLOSED: (5, OutcomeReason.INTERRUPTED),
}


def reason_for_contract(reason: OutcomeReason | None, contract: int | None) -> OutcomeReason | None:
    """`reason` as a program of `contract` knows it (None: the contract is not known, so the
    oldest words)."""
    if reason not in _NEWER_REASONS:
        return reason
    since, older = _NEWER_REASONS[reason]
    return reason if contract is not None and contract >= since else older


class PatchFallbackReason(enum.StrEnum):
    """Why a run whose release offered a patch took the full build instead, in the same run
    (`DeliveryReport.fallback_reason`). The database's CHECK on `runs.patch_fallback_reason` and
    the rows of `patch_fallback_counts` list exactly these values (a test compares them).
    """

    # This host keeps no base tar of the version it runs (a first install, or it was removed).
    BASE_MISSING = "base_missing"
    # The base tar on disk matches no patch offered: altered, truncated, or another build.
    BASE_ALTERED = "base_altered"
    # The patch could not be downloaded (not served, cut short, or not the signed bytes).
    PATCH_DOWNLOAD_FAILED = "patch_download_failed"
    # The patch did not make the signed build: corrupt, truncated, for another base, too long.
    PATCH_REFUSED = "patch_refused"
    # Applying it would take more memory than a patch may (its window is beyond the bound).
    MEMORY_BOUND = "memory_bound"
    # The patched build changed on disk between its check and its install.
    PATCHED_BUILD_CHANGED = "patched_build_changed"
    # The artifact comes from a mirror, which serves no patches.
    MIRROR = "mirror"


class MissReason(enum.StrEnum):
    """Why a scheduled slot passed without a run: what the reconcile worker records on a miss.

    The database's CHECK on `runs.miss_reason` lists exactly these values (a test compares them).
    """

    # The agent was not seen by the control plane at all through the window.
    OFFLINE = "offline"
    # The agent asked, and every round was full (a cap) until the window closed.
    THROTTLED = "throttled"
    # The operators' brake (or a halt of the release) refused it until the window closed.
    BRAKE = "brake"
    # None of the above can be shown from what was recorded.
    UNKNOWN = "unknown"
    # The control plane itself was not serving through the window: nobody could have updated.
    PLATFORM_UNAVAILABLE = "platform_unavailable"
    # The agent was held (by its customer, an operator, or the host's `agent hold`).
    HELD = "held"
    # The agent was seen, and its host's clock was further off the control plane's than the
    # agent follows (`ground.limits.MAX_HOST_CLOCK_OFFSET_SECONDS`): it planned on a wrong clock.
    HOST_CLOCK = "host_clock"
    # The agent was running and tried to poll or claim inside the window, and could not reach the
    # control plane (a connection refused, DNS, TLS, a timeout, a proxy's or load balancer's
    # error): it said so once it reached it again (`UnreachableReport`).
    UNREACHABLE = "unreachable"


class OfferReason(enum.StrEnum):
    """Why an agent is not updated to the newest release of its pair now
    (`AgentConfig.offer_note`): the first of these that holds, in this order.

    An agent reads the reason as text and knows these; a reason added later is shown as it is,
    never a reason to refuse the whole config.
    """

    # An operator pinned the agent or its organisation to another version (or to what it runs).
    PINNED = "pinned"
    # The agent is held (its customer, an operator, or the host's `agent hold`).
    HELD = "held"
    # The newest release is halted (on errors, or by an operator): a person must resume it.
    HALTED = "halted"
    # The brake covers it: the platform's, or the newest release's own.
    BRAKED = "braked"
    # The newest release is still rolling out and has not reached this agent yet (its canary
    # stage or an earlier wave): it is offered the release before it meanwhile.
    WAVE = "wave"
