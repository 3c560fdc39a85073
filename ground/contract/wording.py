"""The English sentence for each reason a run ends, misses or skips its slot, or an agent is not
updated to the newest release: written once.

Both programs say these reasons to people: the panel (in nine languages) and `agent status` (in
English). Each sentence here is the panel's catalogue message id — the panel passes it through
gettext, `agent status` prints it as it is — so the two never word one reason differently.

`N_` marks a sentence for `pybabel extract` (one of its default keywords) without translating it:
the extraction command in control_plane/panel/babel.cfg reads this file beside the panel.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ground.contract.codes import (
    MissReason,
    OfferReason,
    OutcomeReason,
    PatchFallbackReason,
    RefusalCode,
)

__all__ = [
    "HOST_CLOCK_AHEAD_WORDS",
    "HOST_CLOCK_BEHIND_WORDS",
    "MISS_REASON_WORDS",
    "OFFER_REASON_WORDS",
    "OUTCOME_REASON_WORDS",
    "PATCH_FALLBACK_WORDS",
    "SKIP_REASON_WORDS",
    "UNKNOWN_REASON_WORDS",
    "UNREACHABLE_WORDS",
]


def N_(message: str) -> str:
    """`message` itself, marked for the catalogues."""
    return message


# Why a claimed run ended as it did (`OutcomeReport.reason`), said beside "failed".
OUTCOME_REASON_WORDS: Mapping[OutcomeReason, str] = MappingProxyType(
    {
        OutcomeReason.PLATFORM_UNAVAILABLE: N_(
            "our control plane was unavailable until the window closed"
        ),
        OutcomeReason.INTERRUPTED: N_("the update was interrupted and its window closed"),
        OutcomeReason.TOKEN_REVOKED: N_("its permission to update was withdrawn before the switch"),
        OutcomeReason.TOKEN_EXPIRED: N_("its permission to update expired before the switch"),
        OutcomeReason.DISK_FULL: N_("the disk was full"),
        OutcomeReason.DOWNLOAD_FAILED: N_("the download kept failing until the window closed"),
        OutcomeReason.VERIFICATION_FAILED: N_("the new version did not pass the signature checks"),
        OutcomeReason.INSTALL_FAILED: N_("the new version could not be installed"),
        OutcomeReason.HEALTH_CHECK_FAILED: N_("the new version was not healthy in time"),
        OutcomeReason.WINDOW_CLOSED: N_(
            "the window closed before the new version was ready to switch"
        ),
    }
)

# Why a scheduled slot passed without a run (`runs.miss_reason`), said after "missed:".
MISS_REASON_WORDS: Mapping[MissReason, str] = MappingProxyType(
    {
        MissReason.OFFLINE: N_("offline"),
        MissReason.THROTTLED: N_("no room within the update limits"),
        MissReason.BRAKE: N_("updates were paused by our operators"),
        MissReason.PLATFORM_UNAVAILABLE: N_("our control plane was unavailable"),
        MissReason.HELD: N_("the agent is on hold"),
        MissReason.UNKNOWN: N_("reason unknown"),
        MissReason.HOST_CLOCK: N_(
            "the host's clock was more than a day off; set up time synchronisation on the host"
        ),
        MissReason.UNREACHABLE: N_(
            "the agent was running but could not reach our control plane; check the host's "
            "proxy, firewall and DNS, or our status page"
        ),
    }
)

# The same miss with the agent's first error (the run's `error`, the event's
# `unreachable_error`), said after "missed:"; `%(error)s` is the agent's text as it is.
UNREACHABLE_WORDS = N_(
    "the agent was running but could not reach our control plane (%(error)s); check the host's "
    "proxy, firewall and DNS, or our status page"
)

# The same miss where the offset measured is known (the `update.missed` event keeps it), said
# after "missed:"; `%(offset)s` is a length of time ("3 days").
HOST_CLOCK_BEHIND_WORDS = N_(
    "the host's clock was %(offset)s behind; set up time synchronisation on the host"
)
HOST_CLOCK_AHEAD_WORDS = N_(
    "the host's clock was %(offset)s ahead; set up time synchronisation on the host"
)

# Why a slot was given up without a run (`runs.skip_reason`, a refusal that consumes the slot
# without a token) or is being refused (a halted release), said after "skipped:".
SKIP_REASON_WORDS: Mapping[RefusalCode, str] = MappingProxyType(
    {
        RefusalCode.HELD: MISS_REASON_WORDS[MissReason.HELD],
        RefusalCode.RELEASE_ROLLED_BACK: N_(
            "this agent rolled the release back before; it waits for a newer one"
        ),
        # Halted by an operator or on its failures, or under its own brake: the slot cannot tell
        # which, and no other release is stopped by it.
        RefusalCode.RELEASE_HALTED: N_(
            "the rollout of its release is stopped (halted, or paused by its own brake)"
        ),
    }
)

# Why an agent is not updated to its pair's newest release now (`AgentConfig.offer_note`), said
# after "not updated to <version>:".
OFFER_REASON_WORDS: Mapping[OfferReason, str] = MappingProxyType(
    {
        OfferReason.PINNED: N_("pinned to another version by our operators"),
        OfferReason.HELD: MISS_REASON_WORDS[MissReason.HELD],
        # The halt's reason follows in brackets: a person's, or the failures that tripped it.
        OfferReason.HALTED: N_(
            "its rollout is halted (by our operators, or automatically after too many failed "
            "updates)"
        ),
        # The platform's brake or this release's own: either pauses this release's rollout.
        OfferReason.BRAKED: N_("its rollout is paused by our operators"),
        OfferReason.WAVE: N_("the new release has not reached this agent in its rollout yet"),
    }
)

# Why a run took the full build although its release offered a patch
# (`DeliveryReport.fallback_reason`), said after "as a full build after a failed patch:".
PATCH_FALLBACK_WORDS: Mapping[PatchFallbackReason, str] = MappingProxyType(
    {
        PatchFallbackReason.BASE_MISSING: N_("the host kept no copy of its previous version"),
        PatchFallbackReason.BASE_ALTERED: N_("the host's copy of its previous version had changed"),
        PatchFallbackReason.PATCH_DOWNLOAD_FAILED: N_("the patch could not be downloaded"),
        PatchFallbackReason.PATCH_REFUSED: N_("the patch did not make the signed build"),
        PatchFallbackReason.MEMORY_BOUND: N_("the patch would have needed too much memory"),
        PatchFallbackReason.PATCHED_BUILD_CHANGED: N_(
            "the patched build changed on disk before its install"
        ),
        PatchFallbackReason.MIRROR: N_("the build came from a mirror, which serves no patches"),
    }
)

# A reason recorded by a newer program than the one reading it.
UNKNOWN_REASON_WORDS = MISS_REASON_WORDS[MissReason.UNKNOWN]
