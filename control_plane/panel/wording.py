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

from control_plane.panel.i18n import Language
from control_plane.runs.views import RunView
from ground.contract import OutcomeReason
from shared_planner import PlannedSlot, WallTime, WallTimeKind
from shared_planner.schedule_problems import ScheduleProblem, ScheduleProblemKind

__all__ = [
    "ONLINE_WITHIN",
    "PreviewNight",
    "is_online",
    "miss_reason",
    "outcome_reason",
    "run_line",
    "schedule_problem_text",
    "seen_text",
    "slot_notes",
    "status_text",
]

# An agent syncs every minute and records its visit at most every 30 seconds: three quiet minutes
# mean it is not reaching us.
ONLINE_WITHIN = timedelta(minutes=3)


def _shown_value(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


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
    """Why a slot was missed or skipped (a run's `miss_reason`, a refusal's code)."""
    if reason == "offline":
        return lang.gettext("offline")
    if reason == "throttled":
        return lang.gettext("no room within the update limits")
    if reason == "brake":
        return lang.gettext("updates were paused by our operators")
    if reason == "platform_unavailable":
        return lang.gettext("our control plane was unavailable")
    if reason == "held":
        return lang.gettext("the agent is on hold")
    if reason == "release_rolled_back":
        return lang.gettext("this agent rolled the release back before; it waits for a newer one")
    if reason == "release_halted":
        return lang.gettext("the release is halted by our operators")
    return lang.gettext("reason unknown")


def outcome_reason(lang: Language, reason: str | None) -> str | None:
    """Why a claimed run ended as it did (`ground.contract.OutcomeReason`), or None for none."""
    if reason is None:
        return None
    if reason == OutcomeReason.PLATFORM_UNAVAILABLE:
        return lang.gettext("our control plane was unavailable until the window closed")
    if reason == OutcomeReason.INTERRUPTED:
        return lang.gettext("the update was interrupted and its window closed")
    if reason == OutcomeReason.TOKEN_REVOKED:
        return lang.gettext("its permission to update was withdrawn before the switch")
    if reason == OutcomeReason.TOKEN_EXPIRED:
        return lang.gettext("its permission to update expired before the switch")
    if reason == OutcomeReason.DISK_FULL:
        return lang.gettext("the disk was full")
    if reason == OutcomeReason.DOWNLOAD_FAILED:
        return lang.gettext("the download kept failing until the window closed")
    if reason == OutcomeReason.VERIFICATION_FAILED:
        return lang.gettext("the new version did not pass the signature checks")
    if reason == OutcomeReason.INSTALL_FAILED:
        return lang.gettext("the new version could not be installed")
    if reason == OutcomeReason.HEALTH_CHECK_FAILED:
        return lang.gettext("the new version was not healthy in time")
    return lang.gettext("reason unknown")


def run_reason(run: RunView) -> str | None:
    """The run's outcome reason when the services report one (issue 13 adds it to the run)."""
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
        return lang.gettext("missed: %(reason)s", reason=miss_reason(lang, run.miss_reason))
    if status == "skipped":
        # A skipped run keeps its reason in `skip_reason` (a missed one in `miss_reason`).
        reason = run.skip_reason or run.miss_reason
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
