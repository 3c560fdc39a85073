"""The core's facts, said in the reader's language.

The planner and the services return kinds, fields, values and instants; every sentence a customer
reads is made here (or in a template) from a catalog message, so no English string from the core
reaches a Dutch page. This module says the schedules and their problems, the nights' wall times,
the runs and their outcomes, and whether an agent is seen; `event_wording` says the trail and the
notifications, `rollout_wording` the releases' rollout, pins and holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from control_plane.accounts.services import (
    FIRST_PANEL_KEY,
    UNNAMED_OPERATOR_KEY,
    UNNAMED_PANEL_KEY,
)
from control_plane.agent_config.services import STRETCH_GAP
from control_plane.panel.i18n import Language
from control_plane.runs.views import RunView
from ground.contract import MissReason, RefusalCode
from ground.contract.plain_text import shown
from ground.contract.wording import (
    HOST_CLOCK_AHEAD_WORDS,
    HOST_CLOCK_BEHIND_WORDS,
    MISS_REASON_WORDS,
    OUTCOME_REASON_WORDS,
    PATCH_FALLBACK_WORDS,
    SKIP_REASON_WORDS,
    UNKNOWN_REASON_WORDS,
    UNREACHABLE_WORDS,
)
from shared_planner import PlannedSlot, WallTime, WallTimeKind
from shared_planner.schedule_problems import ScheduleProblem, ScheduleProblemKind

__all__ = [
    "ONLINE_WITHIN",
    "PreviewNight",
    "host_clock_marker",
    "host_clock_miss",
    "host_clock_notice",
    "is_online",
    "key_name",
    "miss_reason",
    "missed_reason",
    "outcome_reason",
    "run_line",
    "schedule_problem_text",
    "seen_text",
    "slot_notes",
    "status_text",
    "stopped_release_text",
    "unreachable_miss",
]

# Looked up by the value the database holds. A miss reason and a skip reason share their words
# where they share their value (`held`).
_REASON_WORDS = {
    code.value: words for code, words in [*SKIP_REASON_WORDS.items(), *MISS_REASON_WORDS.items()]
}
_OUTCOME_WORDS = {reason.value: words for reason, words in OUTCOME_REASON_WORDS.items()}
_FALLBACK_WORDS = {reason.value: words for reason, words in PATCH_FALLBACK_WORDS.items()}

# The skip reason of a slot whose release was halted or braked.
RELEASE_STOPPED = RefusalCode.RELEASE_HALTED.value

# An agent syncs every minute and records its visit at most every 30 seconds: a gap that ends its
# stretch of sightings means it is not reaching us (`/metrics` counts the online ones the same way).
ONLINE_WITHIN = STRETCH_GAP


def key_name(lang: Language, name: str) -> str:
    """A key's name (or the trail's actor named after it): a name the control plane gave a key
    nobody named is said in the reader's language; a name someone gave is shown as they wrote it."""
    if name == FIRST_PANEL_KEY:
        return lang.gettext("first panel key")
    if name == UNNAMED_PANEL_KEY:
        return lang.gettext("panel key")
    if name == UNNAMED_OPERATOR_KEY:
        return lang.gettext("operator key")
    return name


def _shown_value(value: object) -> str:
    """A refused time quoted back: shortened, its control characters and bidirectional controls
    shown as U+FFFD (a right-to-left override would turn the rest of the sentence around)."""
    text = value if isinstance(value, str) else repr(value)
    return shown(text if len(text) <= 40 else text[:39] + "…")


def schedule_problem_text(lang: Language, problem: ScheduleProblem) -> str:
    kind = problem.kind
    value = _shown_value(problem.value)
    if kind is ScheduleProblemKind.OFF_GRID:
        return lang.gettext(
            "%(value)s is not on the five-minute grid (for example 03:05 or 03:10).", value=value
        )
    if kind is ScheduleProblemKind.NOT_A_TIME or kind is ScheduleProblemKind.NOT_A_STRING:
        return lang.gettext(
            "%(value)s is not a time of day. Write it as HH:MM on the 24-hour clock, "
            "for example 03:05.",
            value=value,
        )
    if kind is ScheduleProblemKind.DUPLICATE:
        return lang.gettext(
            "%(value)s is already in the list; each time may appear once.", value=value
        )
    if kind is ScheduleProblemKind.EMPTY:
        return lang.gettext("Add at least one time, or switch scheduled updates off.")
    if kind is ScheduleProblemKind.TOO_MANY:
        return lang.gettext(
            "A day has at most %(limit)s five-minute slots; remove some times.",
            limit=lang.number(problem.limit),
        )
    return lang.gettext("The list of times could not be read.")


def wall_time_note(lang: Language, wall: WallTime, zone: ZoneInfo) -> str | None:
    """The daylight saving note for one scheduled time on one day, or None when it is ordinary."""
    label = f"{wall.wall.hour:02d}:{wall.wall.minute:02d}"
    if wall.kind is WallTimeKind.SKIPPED:
        return lang.gettext(
            "%(time)s does not exist on %(day)s (the clocks go forward); it runs at %(shown)s.",
            time=label,
            day=lang.day(wall.day),
            shown=lang.time_with_zone(wall.at, zone),
        )
    if wall.kind is WallTimeKind.REPEATED:
        return lang.gettext(
            "%(time)s happens twice on %(day)s (the clocks go back); it runs once, "
            "at the first: %(shown)s.",
            time=label,
            day=lang.day(wall.day),
            shown=lang.time_with_zone(wall.at, zone),
        )
    return None


def slot_notes(lang: Language, planned: PlannedSlot, zone: ZoneInfo) -> list[str]:
    notes = [note for wall in planned.merged if (note := wall_time_note(lang, wall, zone))]
    if len(planned.merged) > 1:
        labels = ", ".join(f"{w.wall.hour:02d}:{w.wall.minute:02d}" for w in planned.merged)
        notes.append(
            lang.gettext(
                "%(times)s fall on the same moment and run once.",
                times=labels,
            )
        )
    return notes


@dataclass(frozen=True, kw_only=True)
class PreviewNight:
    heading: str
    slots: list[tuple[str, list[str]]]  # (the local time with its zone, its notes)


def miss_reason(lang: Language, reason: str | None) -> str:
    """Why a slot was missed or skipped (a run's `miss_reason` or `skip_reason`, a refusal's
    code), in the words of `ground.contract.wording`."""
    words = _REASON_WORDS.get(reason or "", UNKNOWN_REASON_WORDS)
    return lang.gettext(words)


def stopped_release_text(lang: Language, version: str, stopped_by: object = None) -> str:
    """Why a slot was skipped when its release was stopped (`release_halted`), naming the
    release (only its rollout stopped) and what stopped it (`runs.stopped_by`): a halt (by an
    operator or on its failures, resumed to undo) or the release's own brake (released to undo).
    A slot recorded before that was kept, or consumed as the stop ended, says either."""
    if stopped_by == "halt":
        return lang.gettext("the rollout of release %(version)s was halted", version=version)
    if stopped_by == "brake":
        return lang.gettext(
            "the rollout of release %(version)s was paused by its own brake", version=version
        )
    return lang.gettext(
        "the rollout of release %(version)s was stopped (halted, or paused by its own brake)",
        version=version,
    )


def host_clock_miss(lang: Language, offset_seconds: int) -> str:
    """A slot missed because the host's clock was `offset_seconds` off the control plane's (host
    minus control plane), said with how far and which way."""
    words = HOST_CLOCK_AHEAD_WORDS if offset_seconds > 0 else HOST_CLOCK_BEHIND_WORDS
    return lang.gettext(words, offset=lang.duration(timedelta(seconds=abs(offset_seconds))))


def host_clock_notice(lang: Language, offset_seconds: int) -> str:
    """What a host's clock `offset_seconds` off the control plane's (host minus control plane)
    costs, said while the disagreement is kept: how far, which way, and that its slots are missed.
    """
    offset = lang.duration(timedelta(seconds=abs(offset_seconds)))
    if offset_seconds > 0:
        return lang.gettext(
            "This host's clock is %(offset)s ahead: its scheduled updates are missed, tonight's"
            " too, until the clock is set right.",
            offset=offset,
        )
    return lang.gettext(
        "This host's clock is %(offset)s behind: its scheduled updates are missed, tonight's"
        " too, until the clock is set right.",
        offset=offset,
    )


def host_clock_marker(lang: Language, offset_seconds: int) -> str:
    """A few words beside an agent in a list whose host's clock is `offset_seconds` off."""
    offset = lang.duration(timedelta(seconds=abs(offset_seconds)))
    if offset_seconds > 0:
        return lang.gettext("host's clock %(offset)s ahead", offset=offset)
    return lang.gettext("host's clock %(offset)s behind", offset=offset)


def unreachable_miss(lang: Language, error: str) -> str:
    """A slot missed because the agent could not reach the control plane, with its first error
    (control characters shown, never obeyed)."""
    return lang.gettext(UNREACHABLE_WORDS, error=shown(error))


def missed_reason(
    lang: Language,
    reason: str | None,
    *,
    host_clock_offset_seconds: object = None,
    unreachable_error: object = None,
) -> str:
    """Why a slot was missed, with what the miss kept: how far the host's clock was off, or the
    error of an agent that could not reach the control plane."""
    if reason == MissReason.HOST_CLOCK and type(host_clock_offset_seconds) is int:
        return host_clock_miss(lang, host_clock_offset_seconds)
    if (
        reason == MissReason.UNREACHABLE
        and isinstance(unreachable_error, str)
        and unreachable_error
    ):
        return unreachable_miss(lang, unreachable_error)
    return miss_reason(lang, reason)


def outcome_reason(lang: Language, reason: str | None) -> str | None:
    """Why a claimed run ended as it did (`ground.contract.OutcomeReason`), or None for none."""
    if reason is None:
        return None
    return lang.gettext(_OUTCOME_WORDS.get(reason, UNKNOWN_REASON_WORDS))


def run_reason(run: RunView) -> str | None:
    """The run's outcome reason, when it has one."""
    reason = getattr(run, "reason", None)
    return reason if isinstance(reason, str) else None


def status_text(lang: Language, run: RunView) -> str:
    """What became of a run, in a few words."""
    status = run.status
    version = run.version or run.release_version or "?"
    why = outcome_reason(lang, run_reason(run))
    if status == "up_to_date":
        return lang.gettext("already up to date")
    if status == "succeeded":
        fallback = getattr(run, "patch_fallback_reason", None)
        if isinstance(fallback, str):
            return lang.gettext(
                "updated to %(version)s as a full build after a failed patch: %(reason)s",
                version=version,
                reason=lang.gettext(_FALLBACK_WORDS.get(fallback, UNKNOWN_REASON_WORDS)),
            )
        return lang.gettext("updated to %(version)s", version=version)
    if status == "failed":
        if why is not None:
            return lang.gettext(
                "failed: %(reason)s; the previous version keeps running", reason=why
            )
        return lang.gettext("failed; the previous version keeps running")
    if status == "rolled_back":
        if why is not None:
            return lang.gettext(
                "rolled back: %(reason)s; the previous version keeps running", reason=why
            )
        return lang.gettext("rolled back; the previous version keeps running")
    if status == "unauthorised":
        if why is not None:
            return lang.gettext(
                "switched without permission: %(reason)s; recorded, not counted as an update",
                reason=why,
            )
        return lang.gettext(
            "switched after its permission ended; recorded, not counted as an update"
        )
    if status == "missed":
        why = missed_reason(lang, run.miss_reason, unreachable_error=run.error)
        return lang.gettext("missed: %(reason)s", reason=why)
    if status == "skipped":
        # A skipped run keeps its reason in `skip_reason` (a missed one in `miss_reason`).
        reason = run.skip_reason or run.miss_reason
        if reason == RELEASE_STOPPED and run.release_version:
            return lang.gettext(
                "skipped: %(reason)s",
                reason=stopped_release_text(lang, run.release_version, run.stopped_by),
            )
        return lang.gettext("skipped: %(reason)s", reason=miss_reason(lang, reason))
    if status == "claimed":
        return lang.gettext("in progress")
    if status == "requested":
        return lang.gettext("waiting for the agent")
    return lang.gettext("unknown state")


def run_line(lang: Language, run: RunView, zone: ZoneInfo) -> str:
    if run.trigger == "schedule" and run.slot_at is not None:
        return lang.gettext(
            "%(when)s (scheduled) — %(outcome)s",
            when=lang.moment(run.slot_at, zone),
            outcome=status_text(lang, run),
        )
    return lang.gettext(
        "%(when)s (update now) — %(outcome)s",
        when=lang.moment(run.created_at, zone),
        outcome=status_text(lang, run),
    )


def is_online(last_seen_at: datetime | None, now: datetime) -> bool:
    return last_seen_at is not None and now - last_seen_at <= ONLINE_WITHIN


def seen_text(lang: Language, last_seen_at: datetime | None, now: datetime, zone: ZoneInfo) -> str:
    """ "online", or since when not, judged at the request's instant."""
    if is_online(last_seen_at, now):
        return lang.gettext("online")
    if last_seen_at is None:
        return lang.gettext("never seen")
    return lang.gettext("offline since %(when)s", when=lang.moment(last_seen_at, zone))


def catch_up_text(lang: Language, minutes: int) -> str:
    return lang.ngettext(
        "An update may start up to %(count)s minute after its time.",
        "An update may start up to %(count)s minutes after its time.",
        minutes,
        count=lang.number(minutes),
    )
