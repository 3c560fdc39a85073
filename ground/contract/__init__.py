"""The contract between the agent and the control plane, written once (docs/architecture.md).

Pure: no I/O. Both programs, the simulated fleet and the test fakes import it; a string that is
part of the contract is written here and nowhere else. Its numbers are `ground.limits` (stdlib
only, so the planner can import them too).

    fields      `Instant`, the field type of every instant (its format: `ground.instants`)
    codes       every refusal code, with `consumes_slot` and its status; the reasons an agent is
                not updated to its pair's newest release (`OfferReason`)
    messages    the request and answer models of every agent endpoint
    wording     the English sentence for each reason a run ends, misses or skips, or an agent
                is not updated to the newest release (the panel's catalogue msgids; `agent
                status` prints them as they are)
    (here)      the API version, the contract's version, the paths and the headers
"""

from ground.contract.codes import (
    ENDED_BY_CONTROL_PLANE,
    NOT_THE_BUILDS_FAILURE,
    AnswerCode,
    MissReason,
    OfferReason,
    OutcomeReason,
    PatchFallbackReason,
    RefusalCode,
    reason_for_contract,
    stored_code,
)
from ground.contract.fields import Instant
from ground.contract.messages import (
    DEFAULT_TRACK,
    AgentConfig,
    BrakeView,
    ClaimedRelease,
    ClaimGrant,
    ClaimRequest,
    DeliveryReport,
    EnrolledAgent,
    EnrollRequest,
    ErrorAnswer,
    ErrorDetail,
    HoldRequest,
    HoldView,
    ManualUpdateView,
    NothingToDoReport,
    OfferNote,
    OutcomeReport,
    OutcomeStatus,
    ReleaseName,
    ReleaseTrack,
    ReleaseView,
    ScheduleView,
    SwapPermit,
    TokenView,
    UnreachableAnswer,
    UnreachableReport,
    UnreachableResult,
)
from ground.instants import InstantError, format_instant, parse_instant
from ground.limits import Product

__all__ = [
    "AGENT_CREDENTIAL_PREFIX",
    "API_PREFIX",
    "API_VERSION",
    "CHANNEL_PARAM",
    "CLAIMS_PATH",
    "CONFIG_PATH",
    "CONTRACT_VERSION",
    "CONTRACT_VERSION_HEADER",
    "DEFAULT_TRACK",
    "ENDED_BY_CONTROL_PLANE",
    "ENROLLMENT_TOKEN_PREFIX",
    "ENROLL_PATH",
    "HOLD_PATH",
    "HOST_ID_HEADER",
    "HOST_TIME_HEADER",
    "MANUAL_UPDATES_PATH",
    "NOT_THE_BUILDS_FAILURE",
    "PLATFORM_PARAM",
    "RUNS_PATH",
    "SERVER_TIME_HEADER",
    "TRUST_ROOTS_PATH",
    "TRUST_ROOT_VERSION_HEADER",
    "UNREACHABLE_PATH",
    "AgentConfig",
    "AnswerCode",
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
    "Instant",
    "InstantError",
    "ManualUpdateView",
    "MissReason",
    "NothingToDoReport",
    "OfferNote",
    "OfferReason",
    "OutcomeReason",
    "OutcomeReport",
    "OutcomeStatus",
    "PatchFallbackReason",
    "Product",
    "RefusalCode",
    "ReleaseName",
    "ReleaseTrack",
    "ReleaseView",
    "ScheduleView",
    "SwapPermit",
    "TokenView",
    "UnreachableAnswer",
    "UnreachableReport",
    "UnreachableResult",
    "artifact_path",
    "confirm_path",
    "format_instant",
    "parse_instant",
    "reason_for_contract",
    "run_path",
    "stored_code",
    "trust_root_path",
]

# The API's major version: in every path, and the OpenAPI document's version.
API_VERSION = "1"
API_PREFIX = f"/v{API_VERSION}"

# The contract's own version, apart from the API's major version in the paths: one more with each
# release that changes what an agent sends or reads (a field, a code, a header), additions
# included, so either side can tell which contract the other speaks. Agents send it with every
# request and the control plane with every answer (and in `AgentConfig.contract_version`), as a
# decimal integer in `CONTRACT_VERSION_HEADER`.
#   1   agents from before this header: they send none, and are served as version 1
#   2   the header itself, and `AgentConfig.contract_version`
#   3   nachtwacht's own agent as a product: `AgentConfig.updater_release`, `ClaimRequest.product`
#       and `ClaimGrant.product`, `updater_version` in the claim and the run reports
#   4   `OutcomeReport.delivery`: whether the build came as a patch or whole, and why a patch
#       offered was not used; and a manual update's claim may be refused 429 `org_cap`/
#       `global_cap` like a scheduled one: the agent waits and claims it again at its next minute
#       (agents before 4 end the request on any refusal, and are granted it outside the caps)
#   5   `OutcomeReason.WINDOW_CLOSED`: the switch was refused because the window had closed
#   6   the agent's requests carry `HOST_TIME_HEADER` (its host's clock); agents before 6 send
#       none, and their misses keep the reasons they had
#   7   `UNREACHABLE_PATH`: the agent says which slot's window it tried through and could not
#       reach the control plane (`MissReason.UNREACHABLE`); sent only to a control plane that says
#       it speaks 7 (an older one answers the path 404). Agents before 7 send nothing, and their
#       misses keep the reasons they had
CONTRACT_VERSION = 7
CONTRACT_VERSION_HEADER = "X-Nachtwacht-Contract"

# Every answer the control plane gives (304s and errors included) carries its clock's reading at
# the moment it read the request, in `format_instant`'s form; the agent plans on that clock.
SERVER_TIME_HEADER = "X-Nachtwacht-Server-Time"

# Optional, sent by an agent with every request: a stable id of the host it runs on (8-64 of
# `A-Za-z0-9_-`). Two hosts answering for one agent credential (a copied credential, a cloned
# machine) show on the agent's page; the credential alone cannot tell them apart.
HOST_ID_HEADER = "X-Nachtwacht-Host-Id"

# Optional, sent by an agent with every config poll: the version of the trust root it holds (a
# positive integer). Absent from an agent that holds none (it still verifies releases with its
# trusted-key files) and from agents older than trust roots.
TRUST_ROOT_VERSION_HEADER = "X-Nachtwacht-Trust-Root"

# Optional, sent by an agent with every request: HTTP's own `Date` header (RFC 9110: a client may
# send it when the server is to judge the difference between the two clocks), its host's clock
# as an IMF-fixdate (`ground.instants.format_http_date`). The control plane reads it on the config
# poll and keeps a disagreement beyond what the agent follows (`ground.limits`): a miss while it
# lasts is `MissReason.HOST_CLOCK`. Anything but an IMF-fixdate is ignored.
HOST_TIME_HEADER = "Date"

CONFIG_PATH = f"{API_PREFIX}/agent/config"
CLAIMS_PATH = f"{API_PREFIX}/agent/claims"
RUNS_PATH = f"{API_PREFIX}/agent/runs"
# POST an `UnreachableReport` → 200 `UnreachableAnswer`: the agent could not reach the control
# plane through a slot's window (sent once it reaches it again).
UNREACHABLE_PATH = f"{API_PREFIX}/agent/unreachable"
# PUT a `HoldRequest` (→ `HoldView`), DELETE to release the hold (→ 204).
HOLD_PATH = f"{API_PREFIX}/agent/hold"
# POST (no body) → 201 `ManualUpdateView`: the host asks for an update now (`agent update-now`).
MANUAL_UPDATES_PATH = f"{API_PREFIX}/agent/manual-updates"

# The query parameters of a config poll naming the pair the agent follows (`ReleaseName`s); a
# missing one is `ground.limits`' DEFAULT_CHANNEL / DEFAULT_PLATFORM. The claim carries the same
# pair in its body (`ClaimRequest.channel`, `.platform`).
CHANNEL_PARAM = "channel"
PLATFORM_PARAM = "platform"


# The prefixes that name what a bearer secret is: an agent's own credential, and an enrollment
# token a host exchanges for one. The control plane issues both; the agent checks what it is given.
AGENT_CREDENTIAL_PREFIX = "nwa_"
ENROLLMENT_TOKEN_PREFIX = "nwe_"  # noqa: S105 (a prefix, not a secret)

# POST an `EnrollRequest` with `Authorization: Bearer nwe_…` (an enrollment token, not an agent
# credential) → 201 `EnrolledAgent`: a new agent of the token's organisation and its credential,
# shown this once. The only agent path that takes no agent credential; refusals are `AnswerCode`s.
ENROLL_PATH = f"{API_PREFIX}/agent/enroll"

# GET `trust_root_path(N)` → the exact bytes of trust root version N (404 until it is published).
TRUST_ROOTS_PATH = f"{API_PREFIX}/agent/trust-roots"


def trust_root_path(version: int) -> str:
    return f"{TRUST_ROOTS_PATH}/{version}"


def run_path(run_id: object) -> str:
    """PATCH here with an `OutcomeReport`."""
    return f"{RUNS_PATH}/{run_id}"


def artifact_path(run_id: object) -> str:
    """GET here for the build of a claimed run, while its token is good."""
    return f"{RUNS_PATH}/{run_id}/artifact"


def confirm_path(run_id: object) -> str:
    """POST here (no body) immediately before the swap → 200 `SwapPermit`, else do not switch."""
    return f"{RUNS_PATH}/{run_id}/confirm"
