"""The messages between an agent and the control plane, as the one set of models both use.

The control plane declares them as its routes' request bodies and `response_model`s, so
`/openapi.json` describes exactly what goes over the wire; the agent parses every answer with them
(as untrusted input: a value outside its bounds is a `ValidationError`, never a crash further in);
the simulated fleet and the test fake answer with them.

Answers ignore fields they do not know, so an older agent keeps working against a newer control
plane; requests forbid them, so a typo in a request is a 422 naming the field, not a silent no-op.
"""

from __future__ import annotations

import functools
from typing import Annotated, Literal
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)

from ground.contract.codes import OfferReason, OutcomeReason, PatchFallbackReason, RefusalCode
from ground.contract.fields import Instant
from ground.contract.plain_text import PLAIN_TEXT_PATTERN, REASON_PATTERN, surrogates_escaped
from ground.limits import (
    DEFAULT_CHANNEL,
    DEFAULT_PLATFORM,
    MAX_CATCH_UP_MINUTES,
    MAX_TIMES,
    MAX_UNREACHABLE_ERROR_LENGTH,
    MAX_VERSION_LENGTH,
    MIN_CATCH_UP_MINUTES,
    RELEASE_NAME_PATTERN,
    TIME_PATTERN,
    Product,
)

__all__ = [
    "AGENT_TEXT_MARK",
    "DEFAULT_TRACK",
    "MAX_HOLD_REASON_LENGTH",
    "AgentConfig",
    "BrakeView",
    "ClaimGrant",
    "ClaimRequest",
    "ClaimedRelease",
    "DeliveryReport",
    "EnrollRequest",
    "EnrolledAgent",
    "ErrorAnswer",
    "ErrorDetail",
    "HoldRequest",
    "HoldView",
    "ManualUpdateView",
    "NothingToDoReport",
    "OfferNote",
    "OutcomeReport",
    "OutcomeStatus",
    "ReleaseName",
    "ReleaseTrack",
    "ReleaseView",
    "ScheduleView",
    "SwapPermit",
    "TokenView",
    "UnreachableAnswer",
    "UnreachableReport",
    "UnreachableResult",
]

# The longest text any message carries in one field (an error message, a brake's reason); a
# longer one is refused, not truncated, so nothing is silently lost.
MAX_MESSAGE_LENGTH = 2000
# A slot key is `YYYY-MM-DDTHH:MM`; the bound only keeps absurd values out of the server's parser,
# which answers a malformed key with `not_a_slot`.
MAX_SLOT_KEY_LENGTH = 32

ScheduleTime = Annotated[str, StringConstraints(pattern=TIME_PATTERN)]
Version = Annotated[str, StringConstraints(min_length=1, max_length=MAX_VERSION_LENGTH)]
Message = Annotated[str, StringConstraints(max_length=MAX_MESSAGE_LENGTH)]
SlotKeyText = Annotated[str, StringConstraints(max_length=MAX_SLOT_KEY_LENGTH)]
# Text an agent reports as it saw it (a run's error, an unreachable report's): never refused for
# what it holds, a NUL or a lone surrogate included; the control plane stores it inert
# (`plain_text.inert`). The mark tells the API's document (and its door, which refuses both in
# every other string) so.
AGENT_TEXT_MARK = "x-agent-text"
_AGENT_TEXT = Field(
    json_schema_extra={
        AGENT_TEXT_MARK: True,
        "description": "what the agent saw: kept, each control character but newline and tab "
        "(a NUL too), each bidirectional control and each lone surrogate stored as its visible "
        "escape (`\\u001b`)",
    }
)
# A lone surrogate is written as its escape before the text is read as one (a text holding one is
# no Unicode, which the model refuses): the agent can build its report, the control plane keep it.
AgentMessage = Annotated[
    str,
    BeforeValidator(surrogates_escaped),
    StringConstraints(max_length=MAX_MESSAGE_LENGTH),
    _AGENT_TEXT,
]
# A channel or a platform, as the manifest names them (`stable`, `linux-x86_64`).
ReleaseName = Annotated[str, StringConstraints(pattern=RELEASE_NAME_PATTERN)]

# `succeeded`, `failed` or `rolled_back`: the end of a claimed run as the agent reports it.
OutcomeStatus = Literal["succeeded", "failed", "rolled_back"]


def _known_zone(name: str) -> str:
    # "localtime" and its kin name whatever zone the reading host has: not one platform zone.
    if name.lower() in {"localtime", "posixrules", "factory"}:
        raise ValueError("expected an IANA time zone such as Europe/Amsterdam, not a host alias")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise ValueError("expected an IANA time zone such as Europe/Amsterdam") from exc
    return name


ZoneName = Annotated[
    str, StringConstraints(min_length=1, max_length=64), AfterValidator(_known_zone)
]


class _Answer(BaseModel):
    # A newer control plane may add fields; an older agent must not die on them.
    model_config = ConfigDict(extra="ignore", frozen=True)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# Numbers and switches are strict: `true` is not the number 1 and `1` is not true, so a value of
# the wrong type is refused by name instead of quietly meaning something else.


# -- GET /v1/agent/config -------------------------------------------------------------------------


class ScheduleView(_Answer):
    enabled: bool = Field(strict=True)
    times: tuple[ScheduleTime, ...] = Field(max_length=MAX_TIMES, examples=[["03:00"]])

    @model_validator(mode="after")
    def _usable(self) -> ScheduleView:
        # The same rule as the database's CHECK: no duplicates, and an enabled
        # schedule has at least one time. Switched off, it may hold none.
        if len(set(self.times)) != len(self.times):
            raise ValueError("times: expected each time once")
        if self.enabled and not self.times:
            raise ValueError("times: an enabled schedule needs at least one time")
        return self


class BrakeView(_Answer):
    engaged: bool = Field(strict=True)
    reason: Message | None = None


class ReleaseView(_Answer):
    """The release an agent following `channel` on `platform` is offered now."""

    version: Version
    manifest_version: int = Field(strict=True, ge=1, le=2**63 - 1)
    channel: str | None = Field(default=None, max_length=64)
    platform: str | None = Field(default=None, max_length=64)


class ReleaseTrack(_Answer):
    """The (channel, platform) pair a config was answered for: its `release` is that pair's."""

    channel: ReleaseName = Field(examples=["stable"])
    platform: ReleaseName = Field(examples=["linux-x86_64"])

    @classmethod
    def of(cls, channel: str | None, platform: str | None) -> ReleaseTrack:
        """The pair named, a missing name being the default (an agent older than channels)."""
        return _track_of(channel or DEFAULT_CHANNEL, platform or DEFAULT_PLATFORM)


# Remembered (a pair is frozen): every claim of the 03:00 herd names its pair, and a fleet
# follows a few. A name the pair refuses raises each time (`lru_cache` keeps no exception).
@functools.lru_cache(maxsize=1024)
def _track_of(channel: str, platform: str) -> ReleaseTrack:
    return ReleaseTrack(channel=channel, platform=platform)


# The pair of an agent that names none: an agent older than channels had this one track.
DEFAULT_TRACK = ReleaseTrack.of(None, None)


class ManualUpdateView(_Answer):
    run_id: UUID
    requested_at: Instant | None = None


class HoldView(_Answer):
    """The agent is held: its scheduled slots are skipped (reason `held`) until `until`."""

    until: Instant
    reason: Message | None = None
    # Who set it: the host (`nachtwacht agent hold`), its customer (the panel) or an operator.
    set_by: Literal["agent", "customer", "operator"]


class OfferNote(_Answer):
    """Why the agent is not updated to `newest_version`, the newest release of its pair: present
    only when something stands in the way (see `OfferReason`)."""

    # An `OfferReason`, kept as text: a reason from a newer control plane is shown as it is.
    reason: str = Field(min_length=1, max_length=64, examples=["pinned"])
    newest_version: Version | None = Field(default=None, examples=["1.2.0"])
    # The person's words with it: the halt's or the brake's reason, the pin's or the hold's.
    detail: Message | None = None

    @property
    def known_reason(self) -> OfferReason | None:
        """The reason this agent knows, or None for one added after it."""
        try:
            return OfferReason(self.reason)
        except ValueError:
            return None


class AgentConfig(_Answer):
    """Everything an agent plans with. The ETag covers all of it but `server_time` and
    `contract_version` (replicas of two releases side by side answer the same ETag)."""

    agent_id: UUID
    org_id: UUID | None = None
    name: str | None = Field(default=None, max_length=200)
    schedule: ScheduleView
    timezone: ZoneName
    catch_up_minutes: int = Field(strict=True, ge=MIN_CATCH_UP_MINUTES, le=MAX_CATCH_UP_MINUTES)
    brake: BrakeView
    # The pair the agent asked for (`?channel=&platform=`, else the defaults); absent from an
    # older control plane, which had one release for everyone.
    track: ReleaseTrack | None = None
    release: ReleaseView | None = None
    manual_update: ManualUpdateView | None = None
    # Absent when the agent is not held, and from a control plane older than holds.
    hold: HoldView | None = None
    # Why the agent is not updated to its pair's newest release; absent when nothing stands in the
    # way, and from a control plane older than it.
    offer_note: OfferNote | None = None
    # The newest trust root published (`trust_root_path`); absent while none is, and from a
    # control plane older than trust roots.
    trust_root_version: int | None = Field(default=None, strict=True, ge=1)
    # The contract the control plane speaks (`CONTRACT_VERSION`, also in every answer's header);
    # absent from a control plane older than it.
    contract_version: int | None = Field(default=None, strict=True, ge=1)
    # The release of nachtwacht's own agent (the updater) this host should run, on the same pair;
    # absent while none is published for it, and from a control plane older than it. An agent
    # older than it ignores it.
    updater_release: ReleaseView | None = None
    server_time: Instant | None = None


# -- POST /v1/agent/enroll ------------------------------------------------------------------------

# An agent's name: what the panel lists and an enrollment token's name pattern is matched against.
MAX_AGENT_NAME_LENGTH = 200


class EnrollRequest(_Request):
    """What a host sends with its enrollment token: the name it asks for (the host's name by
    default). The control plane creates the agent in the token's organisation."""

    name: str = Field(
        min_length=1,
        max_length=MAX_AGENT_NAME_LENGTH,
        pattern=PLAIN_TEXT_PATTERN,
        examples=["web-07.example.internal"],
    )


class EnrolledAgent(_Answer):
    """The new agent and its own credential (`nwa_…`), shown this once; the enrollment token
    has one use fewer."""

    agent_id: UUID
    org_id: UUID
    name: str = Field(max_length=MAX_AGENT_NAME_LENGTH)
    credential: str = Field(min_length=1, max_length=200)


# -- POST /v1/agent/claims ------------------------------------------------------------------------


class ClaimRequest(_Request):
    """A scheduled slot (`slot_key`) or a manual update (`manual_run_id`): exactly one."""

    slot_key: SlotKeyText | None = Field(default=None, examples=["2026-11-30T03:00"])
    manual_run_id: UUID | None = None
    from_version: Version | None = Field(default=None, examples=["1.4.1"])
    # The pair whose current release the agent wants; absent means `ground.limits`'
    # DEFAULT_CHANNEL and DEFAULT_PLATFORM, so an agent older than channels keeps working.
    channel: ReleaseName | None = Field(default=None, examples=["stable"])
    platform: ReleaseName | None = Field(default=None, examples=["linux-x86_64"])
    # Which program the claim updates: the managed agent (absent: every agent before the field)
    # or nachtwacht's own agent, the updater, whose release the config offers apart.
    product: Product = "agent"
    # The version of nachtwacht's own agent making the claim (absent: an agent from before it).
    updater_version: Version | None = Field(default=None, examples=["1.4.0"])

    @model_validator(mode="after")
    def _exactly_one(self) -> ClaimRequest:
        if (self.slot_key is None) == (self.manual_run_id is None):
            raise ValueError("expected exactly one of slot_key and manual_run_id")
        return self

    @property
    def track(self) -> ReleaseTrack:
        """The pair whose release this claim is for."""
        return ReleaseTrack.of(self.channel, self.platform)


class TokenView(_Answer):
    id: UUID
    expires_at: Instant


class ClaimedRelease(_Answer):
    """The signed release a granted claim may install. Only what the release key signed is
    trusted; the rest says where to fetch it."""

    version: Version
    manifest_version: int = Field(strict=True, ge=1, le=2**63 - 1)
    manifest_b64: str = Field(max_length=1_000_000)
    signature_b64: str = Field(max_length=10_000)
    artifact_url: str = Field(max_length=2048, examples=["/v1/agent/runs/<run_id>/artifact"])


class ClaimGrant(_Answer):
    """201 for a new claim, 200 for the same claim asked again (the same answer every time)."""

    run_id: UUID
    slot_key: SlotKeyText | None = None
    token: TokenView
    release: ClaimedRelease
    # The program the release is a build of (the claim's `product`); absent from a control plane
    # older than it, which granted only the managed agent.
    product: Product = "agent"


# -- POST /v1/agent/runs, PATCH /v1/agent/runs/{run_id} -------------------------------------------


class NothingToDoReport(_Request):
    """Already on the offered release: the slot is consumed and recorded as such."""

    slot_key: SlotKeyText = Field(examples=["2026-11-30T03:00"])
    status: Literal["up_to_date"]
    version: Version | None = None
    updater_version: Version | None = Field(default=None, examples=["1.4.0"])


class DeliveryReport(_Request):
    """How the build reached the host: `patch` (from its own base) or `full` (the artifact). A
    full build names why when its release offered a patch (`fallback_reason`); a patch names none.
    """

    kind: Literal["patch", "full"]
    fallback_reason: PatchFallbackReason | None = None

    @model_validator(mode="after")
    def _reason_only_when_full(self) -> DeliveryReport:
        if self.kind == "patch" and self.fallback_reason is not None:
            raise ValueError(
                f"fallback_reason: {self.fallback_reason.value!r} given for a patch "
                "(expected null: only a full build falls back)"
            )
        return self


class OutcomeReport(_Request):
    status: OutcomeStatus
    version: Version | None = None
    error: AgentMessage | None = None
    # Why it ended so (absent for a plain success); the panel words it per language.
    reason: OutcomeReason | None = None
    # The control plane's time (as the agent learned it) of the switch to the new version, for a
    # run that switched; the control plane refuses a switch outside the window or after its token
    # was revoked (`AnswerCode.OUTCOME_NOT_AUTHORISED`).
    switched_at: Instant | None = None
    # The version of nachtwacht's own agent sending the report: after a self-update that rolled
    # back, the old one that restored itself and reports why.
    updater_version: Version | None = Field(default=None, examples=["1.4.0"])
    # How the build came (absent: the agent did not say — it is older than the field, or nothing
    # was downloaded); sent only to a control plane of contract 4 or newer.
    delivery: DeliveryReport | None = None


# -- POST /v1/agent/unreachable ------------------------------------------------------------------

# Something besides white space (a search, as JSON Schema's `pattern` is).
UnreachableError = Annotated[
    str,
    BeforeValidator(surrogates_escaped),
    StringConstraints(max_length=MAX_UNREACHABLE_ERROR_LENGTH, pattern=r"\S"),
    _AGENT_TEXT,
]


class UnreachableReport(_Request):
    """The agent was running inside the window of its scheduled slot `slot_key`, tried to poll or
    to claim, and could not reach the control plane (no connection, DNS, TLS, a timeout, or an
    answer from something on the way: a proxy's or a load balancer's error page). Sent once it
    reaches the control plane again. `error` is the first failure's text, something besides
    white space and at most `MAX_UNREACHABLE_ERROR_LENGTH` long (kept inert); the times are the
    first and the last try, on the control plane's clock as the agent followed it."""

    slot_key: SlotKeyText = Field(examples=["2026-11-30T03:00"])
    error: UnreachableError = Field(
        examples=["GET /v1/agent/config: cannot connect ([Errno 111] Connection refused)"]
    )
    first_tried_at: Instant
    last_tried_at: Instant
    attempts: int = Field(strict=True, ge=1, le=100_000)

    @model_validator(mode="after")
    def _in_order(self) -> UnreachableReport:
        if self.last_tried_at < self.first_tried_at:
            raise ValueError(
                f"last_tried_at: {self.last_tried_at.isoformat()} is before first_tried_at "
                f"{self.first_tried_at.isoformat()} (expected the last try at or after the first)"
            )
        return self


# What became of a report: `corrected` (the slot's miss read `offline` and now reads
# `unreachable`), `recorded` (no miss yet: the missed pass records it as `unreachable` when the
# window closes without a run), `unchanged` (the slot ran, was skipped, was missed for a reason
# that comes first, or was reported before: nothing changed).
UnreachableResult = Literal["corrected", "recorded", "unchanged"]


class UnreachableAnswer(_Answer):
    """200 for every report the control plane could read; `message` says what it changed."""

    slot_key: SlotKeyText
    result: UnreachableResult
    message: Message


# -- POST /v1/agent/runs/{run_id}/confirm ---------------------------------------------------------


class SwapPermit(_Answer):
    """The token is still good and the window still open: the agent may switch now. Asked
    immediately before the swap (revocation is honoured up to the swap); any other
    answer, or none, means: do not switch (retry within the window)."""

    run_id: UUID
    token: TokenView
    # The end of the slot's catch-up window on the control plane's clock; None for a manual run.
    window_closes_at: Instant | None = None


# -- PUT / DELETE /v1/agent/hold ------------------------------------------------------------------


# The longest reason a hold keeps, whoever sets it (the host, its customer, an operator).
MAX_HOLD_REASON_LENGTH = 500


class HoldRequest(_Request):
    """The host asks to be held (`nachtwacht agent hold --until`). The reason is typed by a
    person at the host and shown on the trail and by `agent status`: like every reason a person
    types, it holds no control character and no bidirectional control, at most
    `MAX_HOLD_REASON_LENGTH` characters. The control plane refuses one outside that with a 422
    naming the field and the character (`control_plane.inputs.plain_text`); the document states
    it here (a message this contract had at 2,000 characters; the bound was always 500)."""

    until: Instant
    reason: Message | None = Field(
        default=None,
        json_schema_extra={"pattern": REASON_PATTERN, "maxLength": MAX_HOLD_REASON_LENGTH},
    )


# -- every error ----------------------------------------------------------------------------------


class ErrorDetail(_Answer):
    """`{"detail": {...}}` of every refusal. `code` is a `RefusalCode` for claims, an `AnswerCode`
    or a domain code elsewhere; `message` names the field, the value and what was expected."""

    code: str = Field(max_length=64)
    message: Message
    retry_after_seconds: float | None = Field(default=None, ge=0, le=3600)
    reason: Message | None = None
    slot_key: SlotKeyText | None = None

    @property
    def refusal(self) -> RefusalCode | None:
        """The claim refusal this names, or None for a code this agent does not know."""
        try:
            return RefusalCode(self.code)
        except ValueError:
            return None


class ErrorAnswer(_Answer):
    detail: ErrorDetail
