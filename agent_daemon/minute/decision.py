"""One minute of an agent as a pure decision: the five steps of a slot, and nothing else.

`decide(state, config, answer, now) -> action` is called by an executor (the daemon's
`TickExecutor`, the demo's simulated agent) until it returns a final action. The executor does the
I/O each action asks for and feeds the result back as the next `answer`:

    reach the control plane (the executor's first act, every minute)
        Unreachable / CredentialRejected / ConfigRejected ─► Wait          consumes nothing
          (a 5xx answer — the database down — is `platform_unavailable`, not `offline`)
        None (the config is this minute's `config`)
            a claim in the state file ──────────────────────► ResumeClaim
            a manual update not handled yet ────────────────► ClaimManual
            schedule off / no slot due ─────────────────────► Wait          consumes nothing
            the host's clock off beyond the bound ───────────► Wait          consumes nothing
              (`AgentFacts.clock_off`: a slot planned on it is another day's)
            nothing to do (release installed, or none) ─────► NothingToDo   consumes the slot
              (an older release is something to do only when freshly signed: see `is_current`)
            the brake named in the config ──────────────────► Wait          consumes nothing
            an updater release to take (see below) ─────────► ClaimSlot     product "updater"
            else ───────────────────────────────────────────► ClaimSlot
    ClaimSlot / ClaimManual answered
        Unreachable ─────────────────────────────────────────► Wait          consumes nothing
        Granted ─────────────────────────────────────────────► StartUpdate   consumes the slot
        Refused, `RefusalCode.consumes_slot` ───────────────► GiveUpSlot    consumes the slot
        Refused otherwise (cap, brake, unknown code) ────────► Wait          consumes nothing
        Refused (manual) by a cap ───────────────────────────► Wait          claimed again
                                                                       next minute, while
                                                                       the config offers it
        Refused (manual) otherwise ──────────────────────────► EndManual     that request only

Nachtwacht's own agent (the updater) updates itself through the same slot, claim and caps: when
the config offers an updater release this host can take (`AgentFacts.updater_version` is known —
the host has a self-update mechanism — and the offer is not current; the control plane does not
offer a release this host rolled back) the slot's claim is for it, and the managed agent's
update waits for the next slot. The updater goes first because a newer updater may carry fixes
to the update path itself (a trust root it follows, a contract field), which the managed agent's
update then takes. A slot never carries both.

Whether a step consumes the slot is asked of `RefusalCode.consumes_slot` and nothing else; a code
this agent does not know consumes nothing (the slot may still be served while its window is open).
No clock is read here and nothing is written: `now` is the executor's one reading for the minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar, Literal

from ground.contract import AgentConfig, ClaimGrant, ErrorDetail, Product, RefusalCode
from shared_planner import Slot, due_slot
from signed_release.versions import version_key

__all__ = [
    "Action",
    "AgentFacts",
    "Answer",
    "ClaimAnswer",
    "ClaimManual",
    "ClaimRequestAction",
    "ClaimSlot",
    "ConfigRejected",
    "CredentialRejected",
    "EndManual",
    "GiveUpSlot",
    "Granted",
    "NothingToDo",
    "Refused",
    "ResumeClaim",
    "StartUpdate",
    "TickResult",
    "Unreachable",
    "Wait",
    "WaitReason",
    "decide",
    "is_current",
]

# How a minute ended, as `Daemon.tick` returns it and the simulated agent records it. The
# executor adds `dispatched` (an update was carried out), `retrying` (an update met a failure
# that may pass and is tried again next minute, inside its window), `parked` (stopping at a step
# boundary) and `error` (an I/O failure cost the minute).
WaitReason = Literal[
    "offline",
    "platform_unavailable",
    "credential_refused",
    "bad_config",
    "schedule_off",
    "host_clock",
    "no_slot",
    "braked",
    "throttled",
    "refused",
]
TickResult = Literal[
    WaitReason,
    "up_to_date",
    "slot_gone",
    "manual_refused",
    "parked",
    "dispatched",
    "retrying",
    "error",
]


@dataclass(frozen=True, kw_only=True)
class AgentFacts:
    """What the agent knows of itself at the start of the minute (the `state` of `decide`)."""

    last_consumed_at: datetime | None
    installed_version: str | None
    claim_in_progress: bool = False
    handled_manual_runs: frozenset[str] = field(default_factory=frozenset)
    # The highest manifest_version this host accepted (None: none yet, or not known).
    floor: int | None = None
    # The version of nachtwacht's own agent running here, when this host can update it (None:
    # it cannot, and no updater release is claimed), and the highest updater manifest_version it
    # accepted (None: not known).
    updater_version: str | None = None
    updater_floor: int | None = None
    # The host's clock and the control plane's differ beyond the bound the agent follows
    # (`ServerClock.disagreement`): "now" is then the host's clock plus the bound, another day
    # than the control plane's, so a scheduled slot is neither claimed nor consumed on it (the
    # control plane would refuse the claim, and the slot consumed would be a later night's), nor
    # noted as one the control plane could not be reached in (the daemon's offline minute).
    clock_off: bool = False


# -- answers: what the executor found out doing the last action --------------------------------


@dataclass(frozen=True, kw_only=True)
class Unreachable:
    """No answer, a timeout, or a 5xx that is not a refusal (the database is down): offline.
    `request` is the claim that went unanswered, None when the reach itself did. `platform`: the
    control plane did answer, with a 5xx (`database_unavailable`): it is unavailable, this host
    is not offline — logged so, and never counted as throttled."""

    error: str
    request: ClaimSlot | ClaimManual | None = None
    platform: bool = False


@dataclass(frozen=True, kw_only=True)
class CredentialRejected:
    error: str


@dataclass(frozen=True, kw_only=True)
class ConfigRejected:
    """The control plane answered, but not with a config this agent can use."""

    error: str


@dataclass(frozen=True, kw_only=True)
class ClaimSlot:
    """Step 4: ask for the throttle token of `slot`."""

    slot: Slot
    from_version: str | None
    # The managed agent's release, or nachtwacht's own agent's (`from_version` is then its).
    product: Product = "agent"
    final: ClassVar[bool] = False
    consumes_slot: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class ClaimManual:
    """A manual update ("update now"): claimed without the planner, through the caps; claimed
    again each minute while a cap refuses it, until it is granted or otherwise refused."""

    run_id: str
    from_version: str | None
    final: ClassVar[bool] = False
    consumes_slot: ClassVar[bool] = False


ClaimRequestAction = ClaimSlot | ClaimManual


@dataclass(frozen=True, kw_only=True)
class Granted:
    request: ClaimRequestAction
    grant: ClaimGrant


@dataclass(frozen=True, kw_only=True)
class Refused:
    request: ClaimRequestAction
    detail: ErrorDetail


ClaimAnswer = Granted | Refused | Unreachable
# `None` is the reach's success: `config` holds what it brought.
Answer = Unreachable | CredentialRejected | ConfigRejected | Granted | Refused | None


# -- actions: what the executor is to do next ----------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Wait:
    """Nothing more this minute; nothing consumed. The other fields are for the log line: the
    planned `slot` (a brake named in the config), the unanswered or refused claim `request`,
    the refusal's `detail`, or the `error` that stopped the reach."""

    reason: WaitReason
    slot: Slot | None = None
    request: ClaimSlot | ClaimManual | None = None
    detail: ErrorDetail | None = None
    error: str | None = None
    final: ClassVar[bool] = True
    consumes_slot: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class ResumeClaim:
    """Finish the claim the state file holds before planning anything new (crash safety)."""

    final: ClassVar[bool] = True
    consumes_slot: ClassVar[bool] = False


@dataclass(frozen=True, kw_only=True)
class NothingToDo:
    """Step 2: already on the release (or none published): consume the slot and report it."""

    slot: Slot
    version: str | None
    final: ClassVar[bool] = True
    consumes_slot: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class StartUpdate:
    """Steps 4 and 5: the grant is the claim. Persist it (with the consumed slot, when it is a
    scheduled one) before anything else, then dispatch."""

    request: ClaimRequestAction
    grant: ClaimGrant
    final: ClassVar[bool] = True

    @property
    def consumes_slot(self) -> bool:
        return isinstance(self.request, ClaimSlot)


@dataclass(frozen=True, kw_only=True)
class GiveUpSlot:
    """The control plane says the slot is gone (`RefusalCode.consumes_slot`): consume it
    locally and stop asking; its word counts."""

    slot: Slot
    refusal: RefusalCode
    detail: ErrorDetail
    from_version: str | None
    final: ClassVar[bool] = True
    consumes_slot: ClassVar[bool] = True


@dataclass(frozen=True, kw_only=True)
class EndManual:
    """A refused manual update: that request is handled; no scheduled slot is touched."""

    run_id: str
    detail: ErrorDetail
    final: ClassVar[bool] = True
    consumes_slot: ClassVar[bool] = False


Action = (
    Wait
    | ResumeClaim
    | NothingToDo
    | ClaimSlot
    | ClaimManual
    | StartUpdate
    | GiveUpSlot
    | EndManual
)


def decide(state: AgentFacts, config: AgentConfig | None, answer: Answer, now: datetime) -> Action:
    """The next action of this minute (see the module's docstring for the whole table)."""
    if isinstance(answer, Unreachable):
        reason: WaitReason = "platform_unavailable" if answer.platform else "offline"
        return Wait(reason=reason, request=answer.request, error=answer.error)
    if isinstance(answer, CredentialRejected):
        return Wait(reason="credential_refused", error=answer.error)
    if isinstance(answer, ConfigRejected):
        return Wait(reason="bad_config", error=answer.error)
    if isinstance(answer, Granted):
        return StartUpdate(request=answer.request, grant=answer.grant)
    if isinstance(answer, Refused):
        return _refused(answer)
    if config is None:
        return Wait(reason="bad_config", error="no config to plan with")
    return _plan(state, config, now)


def _plan(state: AgentFacts, config: AgentConfig, now: datetime) -> Action:
    if state.claim_in_progress:
        return ResumeClaim()
    manual = config.manual_update
    if manual is not None and str(manual.run_id) not in state.handled_manual_runs:
        return ClaimManual(run_id=str(manual.run_id), from_version=state.installed_version)
    if not config.schedule.enabled:
        return Wait(reason="schedule_off")
    if state.clock_off:
        return Wait(reason="host_clock")
    slot = due_slot(
        config.schedule.times,
        now=now,
        tz=config.timezone,
        last_consumed=state.last_consumed_at,
        catch_up=timedelta(minutes=config.catch_up_minutes),
    )
    if slot is None:
        return Wait(reason="no_slot")
    if _updater_to_take(state, config):
        if config.brake.engaged:
            return Wait(reason="braked", slot=slot, error=config.brake.reason)
        return ClaimSlot(slot=slot, from_version=state.updater_version, product="updater")
    installed = state.installed_version
    release = config.release
    if release is None or is_current(
        installed, release.version, manifest_version=release.manifest_version, floor=state.floor
    ):
        return NothingToDo(slot=slot, version=installed)
    if config.brake.engaged:
        return Wait(reason="braked", slot=slot, error=config.brake.reason)
    return ClaimSlot(slot=slot, from_version=installed)


def _updater_to_take(state: AgentFacts, config: AgentConfig) -> bool:
    """Whether the slot goes to nachtwacht's own agent (see the module's docstring)."""
    offered = config.updater_release
    running = state.updater_version
    if offered is None or running is None:
        return False
    return not is_current(
        running,
        offered.version,
        manifest_version=offered.manifest_version,
        floor=state.updater_floor,
    )


def _refused(answer: Refused) -> Action:
    request, detail = answer.request, answer.detail
    refusal = detail.refusal
    if isinstance(request, ClaimManual):
        # A full round is no answer to the request: the config still offers it, so the next
        # minute claims it again. Anything else (a stop, a finished run) ends it here.
        if refusal is not None and refusal.is_cap:
            return Wait(reason="throttled", request=request, detail=detail)
        return EndManual(run_id=request.run_id, detail=detail)
    if refusal is not None and refusal.consumes_slot:
        return GiveUpSlot(
            slot=request.slot, refusal=refusal, detail=detail, from_version=request.from_version
        )
    if refusal is not None and refusal.is_brake:
        return Wait(reason="braked", request=request, detail=detail)
    if refusal is not None and refusal.is_cap:
        return Wait(reason="throttled", request=request, detail=detail)
    # A code this agent does not know (or one that does not fit a slot): keep the slot, so a
    # newer control plane can never make an older agent lose its night by inventing a code.
    return Wait(reason="refused", request=request, detail=detail)


def is_current(
    installed: str | None,
    release: str,
    *,
    manifest_version: int | None = None,
    floor: int | None = None,
) -> bool:
    """Nothing to do: installed is the release, or newer — unless the older release's manifest
    is newer than every manifest this host accepted (`floor`).

    Only a manifest signed after the installed build's can be a rollback signed on purpose (an
    old release's manifest is at or below the floor, and the updater refuses it anyway); such a
    downgrade is planned, and the updater installs it only if its signed manifest allows a
    downgrade. The config that offers it is not trusted for that: the signature decides."""
    if installed is None:
        return False
    if installed == release:
        return True
    try:
        newer_installed = version_key(installed) > version_key(release)
    except ValueError:
        return False
    signed_after_installed = (
        manifest_version is not None and floor is not None and manifest_version > floor
    )
    return newer_installed and not signed_after_installed
