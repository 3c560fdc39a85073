"""The core's facts, said in the reader's language.

The planner and the services return kinds, fields, values and instants; every sentence a customer
reads is made here (or in a template) from a catalog message, so no English string from the core
reaches a Dutch page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from control_plane.events.services import EventView
from control_plane.forecast.model import StageNight
from control_plane.panel.customer_backend import WebhookTest
from control_plane.panel.i18n import Language
from control_plane.pins.holds import MAX_HOLD
from control_plane.runs.views import RunView
from ground.contract import HoldView, OutcomeReason
from shared_planner import PlannedSlot, WallTime, WallTimeKind
from shared_planner.schedule_problems import ScheduleProblem, ScheduleProblemKind

__all__ = [
    "ONLINE_WITHIN",
    "PreviewNight",
    "event_line",
    "is_online",
    "miss_reason",
    "outcome_reason",
    "release_stage",
    "run_line",
    "schedule_problem_text",
    "seen_text",
    "slot_notes",
    "status_text",
    "webhook_test_text",
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


def event_line(lang: Language, event: EventView) -> str:
    """One step on the timeline. A scheduled update's steps name the schedule, never a person."""
    version = event.data.get("version") or "?"
    by_schedule = event.actor.kind == "schedule"
    if event.kind == "update.requested":
        return lang.gettext("Someone in your organisation asked for an update now.")
    if event.kind == "update.started":
        return lang.gettext("The agent started the update you asked for.")
    if event.kind == "update.scheduled":
        return lang.gettext("The schedule started an update.")
    if event.kind == "update.up_to_date":
        return lang.gettext("The schedule found the agent already up to date.")
    if event.kind == "update.succeeded":
        if by_schedule:
            return lang.gettext("Scheduled update to %(version)s succeeded.", version=version)
        return lang.gettext("Requested update to %(version)s succeeded.", version=version)
    if event.kind == "update.failed":
        if by_schedule:
            return lang.gettext("Scheduled update failed.")
        return lang.gettext("Requested update failed.")
    if event.kind == "update.rolled_back":
        if by_schedule:
            return lang.gettext("Scheduled update was rolled back.")
        return lang.gettext("Requested update was rolled back.")
    if event.kind == "update.skipped":
        reason = miss_reason(lang, str(event.data.get("reason") or ""))
        return lang.gettext("The schedule skipped its slot: %(reason)s.", reason=reason)
    if event.kind == "update.missed":
        return lang.gettext("The slot was missed.")
    if event.kind == "update.unauthorised":
        return lang.gettext(
            "The agent switched after its permission ended; recorded, not counted as an update."
        )
    for line in (_rollout_event_line, _operator_event_line):
        worded = line(lang, event)
        if worded is not None:
            return worded
    return lang.gettext("Other event (%(kind)s).", kind=event.kind)


def _rollout_event_line(lang: Language, event: EventView) -> str | None:
    """The steps of holds, pins, canary marking and forced updates on an agent's timeline."""
    if event.kind == "hold.set":
        who = hold_setter(lang, str(event.data.get("set_by") or ""))
        return lang.gettext("Scheduled updates were held (%(who)s).", who=who)
    if event.kind == "hold.released":
        return lang.gettext("The hold ended: scheduled updates run again.")
    if event.kind == "pin.set":
        if event.data.get("version"):
            return lang.gettext(
                "The operators pinned it to %(version)s.", version=event.data["version"]
            )
        return lang.gettext("The operators held it at the version it runs.")
    if event.kind == "pin.removed":
        return lang.gettext("The operators removed its pin.")
    if event.kind in ("canary.marked", "canary.unmarked"):
        return lang.gettext("The operators changed its canary marking.")
    if event.kind == "update.forced":
        return lang.gettext("The operators forced an update.")
    return None


def _operator_event_line(lang: Language, event: EventView) -> str | None:
    """The steps of the schedule, the agent's own record and the operators' actions."""
    version = event.data.get("version") or "?"
    lines = {
        "schedule.changed": lambda: lang.gettext("The update schedule was changed."),
        "agent.deleted": lambda: lang.gettext("The agent was removed."),
        "agent.release_retry_requested": lambda: lang.gettext(
            "The operators asked it to try the release it rolled back again."
        ),
        "token.revoked": lambda: lang.gettext("The operators withdrew a permission to update."),
        "brake.engaged": lambda: lang.gettext("The operators paused updates."),
        "brake.released": lambda: lang.gettext("The operators resumed updates."),
        "settings.changed": lambda: lang.gettext("The operators changed the platform settings."),
        "rollout.settings_changed": lambda: lang.gettext(
            "The operators changed the rollout settings."
        ),
        "release.published": lambda: lang.gettext(
            "Release %(version)s was published.", version=version
        ),
        "release.withdrawn": lambda: lang.gettext(
            "Release %(version)s was withdrawn.", version=version
        ),
        "release.promoted": lambda: lang.gettext(
            "Release %(version)s is now for everyone.", version=version
        ),
        "release.halted": lambda: lang.gettext("Release %(version)s was halted.", version=version),
        "release.resumed": lambda: lang.gettext(
            "Release %(version)s was resumed.", version=version
        ),
        "credential.issued": lambda: lang.gettext("A key was issued."),
        "credential.revoked": lambda: lang.gettext("A key was revoked."),
        "credential.rotated": lambda: lang.gettext("A key was replaced by a new one."),
        "notice.read": lambda: lang.gettext("An operator read a notice."),
        "webhook.tested": lambda: lang.gettext("A test delivery of the webhook was sent."),
    }
    worded = lines.get(event.kind)
    return None if worded is None else worded()


def is_online(last_seen_at: datetime | None, now: datetime) -> bool:
    return last_seen_at is not None and now - last_seen_at <= ONLINE_WITHIN


def seen_text(lang: Language, last_seen_at: datetime | None, now: datetime, zone: ZoneInfo) -> str:
    """ "online", or since when not, judged at the request's instant."""
    if is_online(last_seen_at, now):
        return lang.gettext("online")
    if last_seen_at is None:
        return lang.gettext("never seen")
    return lang.gettext("offline since %(when)s", when=lang.moment(last_seen_at, zone))


def notification_lines(lang: Language, body: dict[str, Any]) -> list[str]:
    """A notification's summary from its counts (the stored English summary is not shown)."""
    counts = body.get("counts", {})
    lines = [
        lang.ngettext(
            "%(count)s agent had this slot.",
            "%(count)s agents had this slot.",
            int(counts.get("agents", 0)),
            count=lang.number(int(counts.get("agents", 0))),
        )
    ]
    for group in body.get("updated", []):
        lines.append(
            lang.ngettext(
                "%(count)s updated to %(version)s.",
                "%(count)s updated to %(version)s.",
                int(group["count"]),
                count=lang.number(int(group["count"])),
                version=group["version"],
            )
        )
    n = int(counts.get("up_to_date", 0))
    if n:
        lines.append(
            lang.ngettext(
                "%(count)s already up to date.",
                "%(count)s already up to date.",
                n,
                count=lang.number(n),
            )
        )
    n = int(counts.get("failed", 0))
    if n:
        lines.append(
            lang.ngettext("%(count)s failed.", "%(count)s failed.", n, count=lang.number(n))
        )
    n = int(counts.get("rolled_back", 0))
    if n:
        lines.append(
            lang.ngettext(
                "%(count)s rolled back.", "%(count)s rolled back.", n, count=lang.number(n)
            )
        )
    n = int(counts.get("no_outcome", 0))
    if n:
        lines.append(
            lang.ngettext(
                "%(count)s without an outcome yet.",
                "%(count)s without an outcome yet.",
                n,
                count=lang.number(n),
            )
        )
    for reason, n in body.get("missed_by_reason", {}).items():
        lines.append(
            lang.ngettext(
                "%(count)s missed: %(reason)s.",
                "%(count)s missed: %(reason)s.",
                int(n),
                count=lang.number(int(n)),
                reason=miss_reason(lang, reason),
            )
        )
    stale = len(body.get("not_updated_for_three_days", []))
    if stale:
        lines.append(
            lang.ngettext(
                "%(count)s agent has not updated for three days.",
                "%(count)s agents have not updated for three days.",
                stale,
                count=lang.number(stale),
            )
        )
    return lines


def webhook_test_text(lang: Language, test: WebhookTest) -> str:
    """What came of a test delivery (`customer_backend.WebhookTest`): delivered, or why not, in
    words."""
    if test.delivered:
        return lang.gettext(
            "The test arrived: your address answered HTTP %(status)s.",
            status=test.status_code,
        )
    if test.failure == "http_status":
        return lang.gettext(
            "The test did not arrive: your address answered HTTP %(status)s; "
            "an answer from 200 to 299 counts as delivered.",
            status=test.status_code,
        )
    if test.failure == "address_refused":
        return lang.gettext(
            "The test was not sent: the address is not one we may send to (it is not public, "
            "and our operators have not allowed its network)."
        )
    if test.failure == "timeout":
        return lang.gettext("The test did not arrive: your address did not answer in time.")
    return lang.gettext("The test did not arrive: no connection could be made to your address.")


def release_stage(lang: Language, stage: str | None, halted_reason: str | None = None) -> str:
    """A release's stage (canary → everyone) and halt, from the releases domain's fields."""
    if halted_reason:
        return lang.gettext("halted: %(reason)s", reason=halted_reason)
    if stage == "canary":
        return lang.gettext("canary (a first few agents)")
    if stage == "everyone":
        return lang.gettext("everyone")
    if stage == "halted":
        return lang.gettext("halted")
    return "—"


def catch_up_text(lang: Language, minutes: int) -> str:
    return lang.ngettext(
        "An update may start up to %(count)s minute after its time.",
        "An update may start up to %(count)s minutes after its time.",
        minutes,
        count=lang.number(minutes),
    )


def duration_minutes(delta: timedelta) -> int:
    return int(delta.total_seconds() // 60)


def rollout_action(lang: Language, action: str) -> str:
    """An operator's action on a release, as its button and its refusal name it."""
    names = {
        "promote": lang.gettext("promote to everyone"),
        "halt": lang.gettext("halt"),
        "resume": lang.gettext("resume"),
        "brake": lang.gettext("brake this release"),
        "unbrake": lang.gettext("release its brake"),
    }
    return names.get(action, action)


def rollout_done(lang: Language, action: str) -> str:
    done = {
        "promote": lang.gettext("The release is promoted: every agent of its pair is offered it."),
        "halt": lang.gettext("The release is halted: no agent starts it until it is resumed."),
        "resume": lang.gettext("The release is resumed: its agents may claim it again."),
        "brake": lang.gettext("The release's brake is on: no agent starts it."),
        "unbrake": lang.gettext("The release's brake is released."),
    }
    return done.get(action, "")


def offer_basis(lang: Language, basis: str | None) -> str:
    """Why an agent is offered the release it is offered (`rollout.offer`)."""
    if basis == "pinned":
        return lang.gettext("its pin")
    if basis == "current":
        return lang.gettext("the current release")
    if basis == "canary":
        return lang.gettext("a canary of the new release")
    if basis == "previous":
        return lang.gettext("the previous release, until the new one reaches everyone")
    return "—"


def hold_setter(lang: Language, set_by: str) -> str:
    """Who set a hold: the host itself, the customer, or an operator."""
    if set_by == "agent":
        return lang.gettext("set on the host")
    if set_by == "customer":
        return lang.gettext("set in the panel")
    if set_by == "operator":
        return lang.gettext("set by the operators")
    return set_by


def hold_text(lang: Language, hold: HoldView, zone: ZoneInfo) -> str:
    """'held until …' with who set it."""
    return lang.gettext(
        "held until %(when)s (%(who)s)",
        when=lang.moment(hold.until, zone),
        who=hold_setter(lang, hold.set_by),
    )


def notice_text(lang: Language, kind: str, body: dict[str, Any]) -> str:
    """An operators' notice, worded from its facts (the halt's release and counts)."""
    if kind == "release.halted":
        return lang.gettext(
            "Release %(version)s (%(channel)s / %(platform)s) was halted automatically:"
            " %(failures)s of %(finished)s finished updates failed or were rolled back.",
            version=body.get("version", "—"),
            channel=body.get("channel", "—"),
            platform=body.get("platform", "—"),
            failures=lang.number(int(body.get("failures") or 0)),
            finished=lang.number(int(body.get("finished") or 0)),
        )
    return lang.gettext("A notice of a kind this panel does not know (%(kind)s).", kind=kind)


def pin_text(lang: Language, pin: Any, zone: ZoneInfo) -> str:
    """A pin (`PinView`): to which version, or held at what it runs; by whom, when and why."""
    target = (
        lang.gettext("pinned to %(version)s", version=pin.version)
        if pin.version
        else lang.gettext("held at the version it runs")
    )
    return lang.gettext(
        "%(target)s — by %(who)s on %(when)s: %(reason)s",
        target=target,
        who=pin.set_by,
        when=lang.moment(pin.set_at, zone),
        reason=pin.reason or "—",
    )


def offered_text(lang: Language, release: Any) -> str:
    """An agent's offer (`AgentRelease`): the version, its stage and why, or nothing."""
    offered = release.offered
    if offered is None:
        return lang.gettext("nothing is offered")
    # Only punctuation around the worded parts: nothing here to translate.
    stage, why = release_stage(lang, offered.stage), offer_basis(lang, release.basis)
    text = f"{offered.version} ({stage}; {why})"
    if offered.halted:
        text += " — " + lang.gettext("halted")
    if offered.braked:
        text += " — " + lang.gettext("its brake is on")
    return text


def agent_flags(lang: Language, release: Any, pin: Any, zone: ZoneInfo) -> str:
    """The short line of an agent's pin, hold and canary marking on an operator's list."""
    parts = []
    if pin is not None:
        parts.append(
            lang.gettext("pinned to %(version)s", version=pin.version)
            if pin.version
            else lang.gettext("held at the version it runs")
        )
    elif release.pinned:
        parts.append(lang.gettext("the organisation's pin"))
    if release.hold is not None:
        parts.append(hold_text(lang, release.hold, zone))
    if release.canary:
        parts.append(lang.gettext("canary"))
    return "; ".join(parts) or "—"


def operator_agent_saved(lang: Language, saved: str) -> str:
    done = {
        "canary": lang.gettext("The canary marking is saved."),
        "pin": lang.gettext("The pin is set."),
        "unpin": lang.gettext("The pin is removed."),
        "forced": lang.gettext(
            "A forced update is asked for: the agent starts it at its next poll."
        ),
        "hold": lang.gettext("The agent is held."),
        "unhold": lang.gettext("The hold is ended: scheduled updates run again."),
    }
    return done.get(saved, "")


def operator_agent_error(lang: Language, field: str) -> str:
    if field == "version":
        return lang.gettext(
            "Give the version of a published release that is not withdrawn, or choose to hold"
            " at the version it runs."
        )
    if field == "hold_until":
        return lang.gettext(
            "Choose a day after today, at most %(count)s days ahead.",
            count=lang.number(MAX_HOLD.days),
        )
    if field in ("reason", "force_reason", "hold_reason"):
        return lang.gettext(
            "Give a reason of at most %(count)s characters.", count=lang.number(500)
        )
    return lang.gettext("That could not be done: the agent has no pin to remove.")


def stage_night_text(lang: Language, night: StageNight) -> str:
    """How many agents get a release on a night at one stage, within the caps."""
    if night.agents == 0:
        return lang.gettext("no agent needs it")
    return lang.ngettext(
        "%(can)s of %(count)s agent gets it, %(miss)s misses its window",
        "%(can)s of %(count)s agents get it, %(miss)s miss their window",
        night.agents,
        can=lang.number(night.can_update),
        count=lang.number(night.agents),
        miss=lang.number(night.will_miss),
    )
